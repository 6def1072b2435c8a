from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_libero: runs real LIBERO rollouts (CPU rendering; slower)")
