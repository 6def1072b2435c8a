"""Built-in policy adapters, shipped in the wheel as pytest_libero.adapters."""
