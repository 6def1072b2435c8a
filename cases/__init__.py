"""The evaluation test modules, shipped in the wheel as pytest_libero.cases."""
