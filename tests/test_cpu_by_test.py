"""tools/cpu_by_test.py: a subprocess's CPU counts for the outermost test it was started under."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "cpu_by_test.py"

# A test's process starts a nested pytest-like process (its own PYTEST_CURRENT_TEST), which starts a
# worker (inheriting it); a third process starts with no test at all. Each burns CPU_EACH of CPU.
CPU_EACH = 0.8
SCRIPT = textwrap.dedent(f"""
    import os, subprocess, sys, time
    def burn():
        start = time.process_time()
        while time.process_time() - start < {CPU_EACH}:
            pass
    role = sys.argv[1]
    if role == "top":
        env = dict(os.environ, PYTEST_CURRENT_TEST="tests/test_outer.py::test_a (call)")
        subprocess.run([sys.executable, __file__, "nested"], env=env, check=True)
        env.pop("PYTEST_CURRENT_TEST")
        subprocess.run([sys.executable, __file__, "plain"], env=env, check=True)
        sys.exit(3)
    if role == "nested":
        env = dict(os.environ, PYTEST_CURRENT_TEST="test_inner.py::test_b (setup)")
        subprocess.run([sys.executable, __file__, "service"], env=env, check=True)
    burn()
""")


def run_tool(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(TOOL), *args], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)


def test_nested_processes_count_for_the_outer_test_and_the_exit_status_passes_through(tmp_path):
    script = tmp_path / "tree.py"
    script.write_text(SCRIPT)
    out = tmp_path / "cpu.json"
    done = run_tool(tmp_path, "--interval", "0.1", "--json", str(out), "--", sys.executable, str(script), "top")
    assert done.returncode == 3, done.stderr
    data = json.loads(out.read_text())
    by_owner: dict[str, float] = {}
    for process in data["processes"]:
        by_owner[process["owner"]] = by_owner.get(process["owner"], 0.0) + process["user"] + process["system"]
    # The nested process and its service both belong to the outer test: two burns, less a read's worth.
    outer = by_owner.pop("tests/test_outer.py::test_a")
    assert 2 * CPU_EACH - 0.4 <= outer <= 2 * CPU_EACH + 0.6, (outer, by_owner)
    assert not any("test_inner" in owner for owner in by_owner), by_owner
    (plain,) = [p for p in data["processes"] if p["command"][-1:] == ["plain"]]  # started with no test
    assert plain["owner"].startswith("(no test) ") and plain["user"] + plain["system"] >= CPU_EACH - 0.3, plain
    assert data["cpu_s"] >= 3 * CPU_EACH - 0.1  # the command's whole tree, from its rusage
    assert "by test file" in done.stderr and "tests/test_outer.py::test_a" in done.stderr
    assert "  tests/test_outer.py\n" in done.stderr  # the file table has the test's file


def test_a_missing_or_unknown_command_a_bad_interval_or_json_folder_is_a_usage_error(tmp_path):
    done = run_tool(tmp_path)
    assert done.returncode == 2 and "no command: give it after --" in done.stderr
    done = run_tool(tmp_path, "--interval", "0", "--", "true")
    assert done.returncode == 2 and "--interval 0: give a positive number of seconds" in done.stderr
    done = run_tool(tmp_path, "--", "no-such-program-here")
    assert done.returncode == 2 and "cannot start 'no-such-program-here'" in done.stderr
    done = run_tool(tmp_path, "--json", str(tmp_path / "missing" / "cpu.json"), "--", "true")
    assert done.returncode == 2 and f"its folder {tmp_path / 'missing'} does not exist" in done.stderr
