"""The linters configured in pyproject.toml run here, so a change that breaks them fails the gate.

ruff checks every Python file of the checkout; mypy checks the package and the shipped adapters, and
core/ (pytest-free and simulator-free, the contracts every other layer builds on) under --strict.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECKED = ("pytest_libero", "adapters", "cases", "tests", "benchmarks", "tools", "conftest.py")


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_ruff_passes_on_the_whole_checkout():
    done = _run("ruff", "check", "--no-cache", *CHECKED)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_passes_on_the_package_and_the_adapters():
    done = _run("mypy", "--config-file", str(ROOT / "pyproject.toml"), "pytest_libero", "adapters")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


def test_mypy_strict_passes_on_core():
    done = _run("mypy", "--config-file", str(ROOT / "pyproject.toml"), "--strict", "pytest_libero/core")
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.mark.parametrize("source, strict, code", [
    ("def untyped(value):\n    return value\n", True, "no-untyped-def"),
    ("def typed(value: int) -> str:\n    return value\n", False, "return-value"),
])
def test_the_checks_can_fail(tmp_path, source, strict, code):
    """The same invocation on a planted defect fails, naming it (a check that cannot fail proves nothing)."""
    (tmp_path / "planted.py").write_text(source)
    done = _run("mypy", "--config-file", str(ROOT / "pyproject.toml"), *(["--strict"] if strict else []),
                "--cache-dir", str(tmp_path / "cache"), "planted.py", cwd=tmp_path)
    assert done.returncode == 1 and f"[{code}]" in done.stdout, done.stdout
    (tmp_path / "long.py").write_text(f"X = {'1' * 130}\n")
    done = _run("ruff", "check", "--no-cache", "--config", str(ROOT / "pyproject.toml"), "long.py", cwd=tmp_path)
    assert done.returncode == 1 and "E501" in done.stdout, done.stdout
