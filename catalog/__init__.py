"""Frozen protocol data (JSON) and its schemas; shipped in the wheel as pytest_libero.catalog_data."""
