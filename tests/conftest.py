from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

# Pytester's in-process runs drop the modules a run imported when it ends. Tests that import
# LIBERO in this process load part of matplotlib (LIBERO imports matplotlib.cm); a later
# in-process run that draws the summary chart would then import the rest of matplotlib anew
# beside the old part, with two copies of its classes. Importing what the chart uses here, once,
# keeps one copy.
import matplotlib.backends.backend_agg  # noqa: E402,F401
import matplotlib.figure  # noqa: E402,F401


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "real_libero: runs real LIBERO rollouts (CPU rendering; slower)")
    config.addinivalue_line("markers", "slurm: starts a real one-node Slurm cluster (needs root and the slurm-wlm and "
                                       "munge packages; deselect with -m 'not slurm')")
