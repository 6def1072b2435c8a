"""The install check on real installs (docs/install-check.md): the pinned one matches the shipped
reference; MuJoCo 3.3.3 and robosuite 1.4.1, each in a second virtualenv beside the pinned one,
are reported by the doctor and at a run's start.

A drift virtualenv is the pinned environment with one package overridden: its site-packages holds
a .pth that adds the pinned virtualenv's site-packages (after its own) and the one package installed
there with `pip install --no-deps` from the configured index. The test checks that the override is
what imports, and runs the doctor and pytest with that interpreter, so the bench service (started
with the worker's sys.executable) runs in it too.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

pytestmark = pytest.mark.real_libero

ROOT = Path(__file__).resolve().parents[1]
PINNED_SITE = sysconfig.get_paths()["purelib"]


def run(argv: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, MUJOCO_GL="egl")
    env.pop("PYTHONPATH", None)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def overlay(root: Path, requirement: str, module: str, version: str) -> Path:
    """A virtualenv that is the pinned one but for `requirement`; its python."""
    done = run([sys.executable, "-m", "venv", "--without-pip", str(root)], cwd=root.parent)
    assert done.returncode == 0, done.stderr
    site = Path(sysconfig.get_paths(vars={"base": str(root), "platbase": str(root)})["purelib"])
    (site / "zz_pinned.pth").write_text(f"import site; site.addsitedir({PINNED_SITE!r})\n")
    python = root / "bin" / "python"
    done = run([python.as_posix(), "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), requirement],
               cwd=root.parent)
    assert done.returncode == 0, done.stdout + done.stderr
    # The override wins on sys.path: the module imports from the overlay's site-packages.
    done = run([python.as_posix(), "-c", f"import {module}, pytest_libero; print({module}.__version__); "
                f"print({module}.__file__); print(pytest_libero.__file__)"], cwd=root.parent)
    got_version, got_file, plugin = done.stdout.split("\n")[:3]
    assert (got_version, got_file.startswith(str(site))) == (version, True), done.stdout + done.stderr
    assert plugin == str(ROOT / "pytest_libero" / "__init__.py")
    return python


@pytest.fixture(scope="module")
def mujoco_333(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return overlay(tmp_path_factory.mktemp("drift") / "mujoco-3.3.3", "mujoco==3.3.3", "mujoco", "3.3.3")


@pytest.fixture(scope="module")
def robosuite_141(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return overlay(tmp_path_factory.mktemp("drift") / "robosuite-1.4.1", "robosuite==1.4.1", "robosuite", "1.4.1")


def doctor(python: Path | str, cwd: Path, *cells: str) -> subprocess.CompletedProcess[str]:
    return run([str(python), "-m", "pytest_libero", "doctor", *(["--cells", *cells] if cells else [])], cwd=cwd)


def test_the_pinned_install_matches_the_reference(tmp_path):
    done = doctor(sys.executable, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "libero_spatial-t00-s00: states match, after the probe match, images match" in done.stdout
    assert "libero_10-t00-s00: states match, after the probe match, images match" in done.stdout
    assert "installed: mujoco 3.2.3, robosuite 1.4.0" in done.stdout
    assert done.stdout.rstrip().endswith("install: matches the reference")


def test_the_doctor_reports_mujoco_333_physics_on_libero_10_and_rendering_on_libero_spatial(mujoco_333, tmp_path):
    done = doctor(mujoco_333, tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    spatial = next(line for line in lines if line.startswith("libero_spatial-t00-s00:"))
    libero_10 = next(line for line in lines if line.startswith("libero_10-t00-s00:"))
    assert "images differ" in spatial
    assert "states differ" in libero_10
    assert "agentview image differs: channel means by up to" in done.stdout
    assert "installed: mujoco 3.3.3, robosuite 1.4.0" in done.stdout
    assert "install: differs from the reference: physics (states) and rendering (images)" in done.stdout
    assert "likely cause: mujoco: installed 3.3.3, reference made with 3.2.3" in done.stdout


def test_the_doctor_finds_robosuite_141_changes_nothing_and_says_the_version_differs(robosuite_141, tmp_path):
    # LIBERO builds its robots and scenes from its own assets: on these cells robosuite 1.4.1 gives
    # the same states and images bit for bit (docs/install-check.md).
    done = doctor(robosuite_141, tmp_path, "libero_10-t00-s00")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "libero_10-t00-s00: states match, after the probe match, images match" in done.stdout
    assert "note: robosuite: installed 1.4.1, reference made with 1.4.0 (no difference on these cells)" in done.stdout
    assert done.stdout.rstrip().endswith("install: matches the reference")


RUN = ["-p", "no:cacheprovider", "--libero-policy", "zero", "--libero-budget", "decisions",
       "--libero-max-policy-calls", "1"]


def records(output: Path) -> tuple[Path, dict[str, dict]]:
    (run_dir,) = [p for p in output.glob("*/*") if (p / "episodes").is_dir()]
    return run_dir, {p.stem: json.loads(p.read_text()) for p in (run_dir / "episodes").glob("*.json")}


def test_a_run_under_mujoco_333_reports_the_drift_at_each_cells_start(mujoco_333, tmp_path):
    done = run([str(mujoco_333), "-m", "pytest", *RUN, "--libero-scope", "plan", "-k",
                "t00 and s00 and (libero_spatial or libero_10)", "--libero-output", str(tmp_path / "out")],
               cwd=tmp_path)
    assert "2 failed" in done.stdout, done.stdout + done.stderr  # the zero policy; the run is not stopped
    run_dir, found = records(tmp_path / "out")
    spatial, libero_10 = found["libero_spatial-t00-s00"]["install"], found["libero_10-t00-s00"]["install"]
    assert spatial["verdict"] == libero_10["verdict"] == "differs"
    assert spatial["images"] == "differ" and libero_10["states"] == "differ"
    assert spatial["install"]["versions"]["mujoco"] == "3.3.3"
    assert any(w.startswith("WARNING install: differs from the reference") for w in
               found["libero_10-t00-s00"]["warnings"])
    assert "WARNING LIBERO install: differs from the reference in 2 of 2 checked cell(s)" in done.stdout
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["install"]["counts"] == {"matches": 0, "differs": 2, "not checked": 0}
    assert 'id="install-check"' in (run_dir / "report.html").read_text()


def test_a_pinned_run_matches_and_require_reference_stops_at_a_cell_without_one(tmp_path):
    """Under `-n 2`: the stop is found on a worker and crosses xdist to the controller
    (plugin/install_check.py InstallStop, through xdist's own stop flag).

    The standard schedule at fast mode's environment seed (the reference's), one task's init states
    0 and 1 (in the reference), 2 (not in it) and 3. xdist's load scheduling sends the four cells at
    once in two consecutive pairs, (0, 1) to one worker and (2, 3) to the other: states 0 and 1
    match, images included; the other worker stops after state 2's episode, whose record is written
    (its own outcome kept), and state 3 is never run (not_run). The first worker finishes what it
    was sent, as under -x."""
    done = run([sys.executable, "-m", "pytest", *RUN, "-n", "2", "--libero-preflight", "off", "--libero-mode", "full",
                "--libero-schedule",
                "standard", "--libero-seeds", "20260907", "--libero-scope", "task_coverage", "--libero-suite",
                "libero_spatial", "--libero-task-ids", "0", "--libero-init-states", "0,1,2,3",
                "--libero-require-reference", "--libero-output", str(tmp_path / "out")], cwd=tmp_path)
    run_dir, found = records(tmp_path / "out")
    cells = [found[f"libero_spatial-t00-s0{i}-seed20260907"] for i in range(4)]
    for matching in cells[:2]:
        assert (matching["install"]["states"], matching["install"]["images"]) == ("match", "match"), done.stdout
        assert matching["install"]["line"] == "install: matches the reference"
    stopped, never = cells[2:]
    assert stopped["install"]["verdict"] == "not checked"
    assert stopped["outcome"]["outcome"] == "failure"  # the episode's own outcome is kept
    assert never["outcome"]["outcome"] == "not_run"
    assert cells[0]["worker"] == cells[1]["worker"] != stopped["worker"], [c["worker"] for c in cells]
    assert "install: not checked (no reference for this cell) (--libero-require-reference: the run stops" \
        in done.stdout, done.stdout
    assert "Interrupted: install: not checked (no reference for this cell)" in done.stdout, done.stdout
    assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stdout
