"""robosuite's macro-file notice stays out of a bench service's stderr; its other messages do not."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
import tempfile
from pytest_libero.benchmarks.libero.service import prepare_process_environment
{prepare}
import robosuite
from robosuite.utils.log_utils import ROBOSUITE_DEFAULT_LOGGER
ROBOSUITE_DEFAULT_LOGGER.warning("a robosuite warning that must still show")
"""


def _stderr(prepare: bool) -> str:
    program = PROGRAM.format(prepare="prepare_process_environment(tempfile.mkdtemp())" if prepare else "")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_the_service_environment_drops_only_the_macro_file_notice():
    bare, prepared = _stderr(prepare=False), _stderr(prepare=True)
    assert "No private macro file found!" in bare and "setup_macros.py" in bare  # robosuite 1.4.0, on import
    assert "No private macro file found!" not in prepared
    assert "private macro file" not in prepared and "setup_macros.py" not in prepared
    assert "a robosuite warning that must still show" in prepared
