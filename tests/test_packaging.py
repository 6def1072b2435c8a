"""The wheel, as someone else's project gets it: built from the sdist, installed (not editable) into
a fresh virtualenv that cannot see this checkout, and used there.

One sdist, wheel and virtualenv serve the whole module. The virtualenv is a real `pip install` of
the wheel with its dependencies from the configured index (measured at about 50 s here) and a
`pip check`, so a missing or conflicting requirement fails too. In it run the main job of the
README (`pytest --libero-policy demo`: two real LIBERO episodes to native success), `python -m
pytest_libero schedule oft`, and an unrelated project's plain test, which must see the plugin
inert: the same environment as with the plugin disabled, no nvidia-smi call, no file, no line.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

# The wheel is built from the sdist and installed into a fresh venv once per module: minutes, so not in
# the fast tier (docs/testing.md).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
# Checkout folder -> the import path it ships under (setup.py's ROOTS).
SHIPPED_AS = {"pytest_libero": "pytest_libero", "catalog": "pytest_libero/catalog_data",
              "adapters": "pytest_libero/adapters", "cases": "pytest_libero/cases"}


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def build_hook(hook: str, source: Path, out: Path) -> Path:
    """Run setuptools' PEP 517 hook `hook` in `source` (this environment's setuptools: no network,
    no build isolation) and return what it wrote to `out`."""
    code = f"import sys; from setuptools import build_meta; print(build_meta.{hook}(sys.argv[1]))"
    done = run([sys.executable, "-c", code, str(out)], cwd=source)
    assert done.returncode == 0, done.stderr[-3000:]
    return out / done.stdout.strip().splitlines()[-1]


def checkout_files(*folders: str) -> list[str]:
    """The checkout's files as a clean clone has them (tracked, or new and not ignored), under `folders`."""
    done = run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", *folders], cwd=ROOT)
    assert done.returncode == 0, f"git ls-files failed (this test reads the checkout's files): {done.stderr}"
    return [name for name in done.stdout.split("\0") if name and (ROOT / name).is_file()]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from the sdist (so the sdist must hold all that building the wheel needs),
    the sdist from a clean copy of the checkout: build leftovers here (an old egg-info's file list)
    once hid a package missing from the configuration."""
    out = tmp_path_factory.mktemp("dist")
    clean = out / "checkout"
    for name in checkout_files():
        (clean / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, clean / name)
    sdist = build_hook("build_sdist", clean, out)
    with tarfile.open(sdist) as archive:
        archive.extractall(out / "unpacked", filter="data")
    (source,) = (out / "unpacked").iterdir()
    return build_hook("build_wheel", source, out)


def test_the_wheel_ships_every_tracked_file_of_the_package_under_its_import_path(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    tracked = checkout_files(*SHIPPED_AS)
    assert len(tracked) > 100 and "pytest_libero/benchmarks/robomemarena/adapter.py" in tracked
    expected = {SHIPPED_AS[name.split("/", 1)[0]] + "/" + name.split("/", 1)[1] for name in tracked}
    missing = sorted(expected - names)
    assert not missing, f"{len(missing)} tracked file(s) missing from {wheel.name}: {missing[:20]}"
    stray = sorted(n for n in names if not n.startswith(("pytest_libero/", "pytest_libero-")))
    assert not stray, f"the wheel installs outside pytest_libero/: {stray}"
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "libero = pytest_libero.plugin" in zipfile.ZipFile(wheel).read(entry_points).decode()


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh virtualenv with the wheel installed (not editable), its requirements checked; removed
    after the module, in the background (it holds about 2.4 GB: LIBERO's assets, MuJoCo, scipy...)."""
    path = tmp_path_factory.mktemp("wheel-venv") / "venv"
    done = run([sys.executable, "-m", "venv", str(path)], cwd=path.parent)
    assert done.returncode == 0, done.stderr
    # --no-compile: pip's bytecode compilation of every installed module (about 9,200, some 39 s of CPU)
    # is most of the install's CPU; Python compiles and caches what the tests import (about 9 s), as a
    # user's venv does once (user_env lets it write the caches).
    done = run([str(path / "bin" / "python"), "-m", "pip", "install", "-q", "--no-compile", str(wheel)],
               cwd=path.parent, env=user_env(path))
    assert done.returncode == 0, done.stderr[-3000:]
    done = run([str(path / "bin" / "python"), "-m", "pip", "check"], cwd=path.parent, env=user_env(path))
    assert done.returncode == 0, done.stdout + done.stderr
    yield path
    # Removed by a detached `rm -rf` that outlives this test: deleting some 60,000 files took up to 61 s of
    # this module's teardown under the three-worker gate (CI, 2026-12-06), time the worker spends
    # waiting on the disk instead of running its next file. Renamed first, so the folder is gone from
    # its place at once.
    trash = path.with_name("venv.removing")
    path.rename(trash)
    subprocess.Popen(["rm", "-rf", str(trash)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                     stderr=subprocess.DEVNULL, start_new_session=True)


def user_env(venv: Path, path_first: Path | None = None) -> dict[str, str]:
    """A user's shell with `venv` activated: nothing of this checkout or of the pytest running this
    test (its PYTEST_* variables, an xdist worker's id) leaks in, nor an outer PYTHONDONTWRITEBYTECODE
    or the tests' PYTHONPYCACHEPREFIX (the venv is installed without bytecode: its processes cache what
    they compile, beside it)."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "COV_CORE_SOURCE", "PYTHONDONTWRITEBYTECODE",
                        "PYTHONPYCACHEPREFIX")
           and not k.startswith("PYTEST_")}
    bins = [str(path_first)] if path_first else []
    env.update(VIRTUAL_ENV=str(venv), PATH=os.pathsep.join([*bins, str(venv / "bin"), env.get("PATH", "")]))
    return env


def project(tmp_path: Path, files: dict[str, str]) -> Path:
    folder = tmp_path / "project"
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.mark.real_libero  # two real LIBERO episodes (tests/suite_tiers.py fails a test that starts one unmarked)
def test_the_installed_wheel_is_what_runs_and_the_main_job_passes(venv, tmp_path):
    folder = project(tmp_path, {})
    env = user_env(venv)
    where = run([str(venv / "bin" / "python"), "-c", "import pytest_libero; print(pytest_libero.__file__)"],
                cwd=folder, env=env)
    site_packages = venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    assert Path(where.stdout.strip()).parent == site_packages / "pytest_libero", where.stdout + where.stderr
    done = run([str(venv / "bin" / "pytest"), "--libero-policy", "demo", "-p", "no:cacheprovider"], cwd=folder, env=env)
    result = pytest.RunResult(done.returncode, done.stdout.splitlines(), done.stderr.splitlines(), 0)
    result.assert_outcomes(passed=2)
    # Executed controls equal the first-success control: nothing ran after success (early termination).
    result.stdout.fnmatch_lines([
        "libero_10-t00-s00 * PASSED * success/success: 47 calls, 47 decisions, 231 controls (+10 settling), cap 520; "
        "first success at control 231 (policy call 47)",
        "libero_10-t01-s00 * PASSED * success/success: 48 calls, 48 decisions, 240 controls (+10 settling), cap 520; "
        "first success at control 240 (policy call 48)",
        "LIBERO: selected 2 = passed 2 + failed 0 + errored 0 + unattempted 0",
    ])
    (run_dir,) = (folder / "reports" / "demo").iterdir()
    assert json.loads((run_dir / "summary.json").read_text())["overall"]["passed"] == 2
    # Goal progress: both of task 0's predicates reached, the soup first, the sauce at the success control.
    record = json.loads((run_dir / "episodes" / "libero_10-t00-s00.json").read_text())
    assert record["progress"] == {"predicates": [
        {"text": "(in alphabet_soup_1 basket_1_contain_region)", "held_at_end": True, "first_control": 118},
        {"text": "(in tomato_sauce_1 basket_1_contain_region)", "held_at_end": True, "first_control": 231}],
        "fraction_at_end": 1.0, "max_fraction": 1.0}


def test_the_installed_wheel_prints_a_schedule(venv, tmp_path):
    done = run([str(venv / "bin" / "python"), "-m", "pytest_libero", "schedule", "oft"], cwd=project(tmp_path, {}),
               env=user_env(venv))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("schedule oft: OpenVLA-OFT") and "50 episodes per task" in done.stdout


FAKE_NVIDIA_SMI = """#!/bin/sh
echo "$@" >> "{log}"
printf '0, NVIDIA H100 80GB HBM3, GPU-7f3a0c1e-0000-0000-0000-000000000000\\n'
printf '1, NVIDIA H100 80GB HBM3, GPU-7f3a0c1e-0000-0000-0000-000000000001\\n'
"""

USER_TEST = """
import json, os

def test_plain():
    name = "env-" + os.environ.get("PYTEST_XDIST_WORKER", "main") + ".json"
    with open(os.path.join(os.path.dirname(__file__), name), "w") as f:
        json.dump(dict(os.environ), f)
"""


def test_an_unrelated_project_sees_the_installed_plugin_inert(venv, tmp_path):
    """With an nvidia-smi listing two GPUs on PATH, with and without -n 2: the user's test sees the
    environment it sees with the plugin disabled (pytest's own PYTEST_* aside), nvidia-smi is never
    run, no file appears, and no line of the output is the plugin's."""
    fake = tmp_path / "bin"
    fake.mkdir()
    log = tmp_path / "nvidia-smi.log"
    (fake / "nvidia-smi").write_text(FAKE_NVIDIA_SMI.format(log=log))
    (fake / "nvidia-smi").chmod(0o755)
    # Bytecode caches go to a folder outside the project (user_env lets the venv's processes write them
    # beside the modules): pytest's own would appear in the project, with or without the plugin, and the
    # folder must stay as it was. One folder for the five runs, so what the first compiles the others
    # read (with PYTHONDONTWRITEBYTECODE each run compiled pytest, xdist and the plugin anew).
    env = dict(user_env(venv, path_first=fake), PYTHONPYCACHEPREFIX=str(tmp_path / "pycache"))
    for xdist in ([], ["-n", "2"]):
        folder = project(tmp_path / ("xdist" if xdist else "plain"), {"test_user.py": USER_TEST})
        seen = []
        for plugin in (["-p", "no:libero"], []):  # disabled first: what the user's test sees without it
            done = run([str(venv / "bin" / "pytest"), "-p", "no:cacheprovider", *xdist, *plugin], cwd=folder, env=env)
            assert done.returncode == 0, done.stdout + done.stderr
            (written,) = folder.glob("env-*.json")
            seen.append({k: v for k, v in json.loads(written.read_text()).items() if not k.startswith("PYTEST_")})
            written.unlink()
        disabled, enabled = seen
        changed = {k: (disabled.get(k), enabled.get(k)) for k in disabled.keys() | enabled.keys()
                   if disabled.get(k) != enabled.get(k)}
        assert not changed, (xdist, changed)  # name: (without the plugin, with it)
        assert sorted(p.name for p in folder.iterdir()) == ["test_user.py"]
        lines = [line for line in (done.stdout + done.stderr).splitlines()
                 if "libero" in line.lower() and not line.startswith("plugins:")]  # pytest's list of plugins
        assert not lines, lines
    assert not log.exists(), log.read_text()
    # The fake is the nvidia-smi a LIBERO run would ask (it stops at its usage error: no case here).
    done = run([str(venv / "bin" / "pytest"), "-p", "no:cacheprovider", "--libero-scope", "development",
                "test_user.py"], cwd=folder, env=env)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert log.read_text().startswith("--query-gpu=index,name,uuid")
