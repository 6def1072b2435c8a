"""Test helpers for RoboMemArena: a checkout assembled from ../shared/data, and its own runner.

RoboMemArena has no licence: the checkout is assembled into a temporary folder by the data
folder's assemble_checkout.py and never copied into the project. The reference is the checkout's
own `run_all_tasks1_26.py`, run as its README says (its fork and scripts on the path) with the two
things it needs from a user's environment: a `gym` module (an alias of gymnasium) and a LIBERO
config.yaml written in advance.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "robomemarena"
ASSEMBLE = DATA / "assemble_checkout.py"
ADAPTER = Path(__file__).resolve().parent / "robomemarena_scripted_adapter.py"

# b175708's runner calls a task's goal override with one argument, while the scorer's overrides take
# (env, stage_done): a TypeError on the first control of tasks 6-10, 15, 16, 18 and 19, which its loop
# scores 0 (shared/research/robomemarena.md, section 3.6). This driver runs the unchanged runner with that one
# call corrected: it mirrors the loop's stage_done (a stage is done exactly when its check returned True)
# and hands it to the override. Nothing else of the runner changes.
DRIVER = '''
import sys
import eval_tasks2_26 as loop

done = {}
order = []
task_specs, build_initial_state = loop._task_specs, loop._build_initial_state
goal_override_check = loop._goal_override_check


def specs(task_id):
    done.clear()
    out = task_specs(task_id)
    order[:] = [spec.name for spec in out]
    for spec in out:
        def check(env, state, start, fn=spec.check_fn, name=spec.name):
            ok = fn(env, state, start)
            if ok:
                done[name] = True
            return ok
        spec.check_fn = check
    return out


def initial_state(env):
    done.clear()
    return build_initial_state(env)


def override(task_id):
    fn = goal_override_check(task_id)
    return None if fn is None else (lambda env: fn(env, {name: done.get(name, False) for name in order}))


loop._task_specs, loop._build_initial_state, loop._goal_override_check = specs, initial_state, override
import run_all_tasks1_26

# driver.py TASK[:TRIALS],... OUT_ROOT ARGS...: the runner once per task (its --task-start..--task-end is a
# range), each into OUT_ROOT/task<id>, in one process; TRIALS overrides ARGS' --num-trials-per-task.
tasks, out_root, rest = sys.argv[1].split(","), sys.argv[2], sys.argv[3:]
for entry in tasks:
    task, _, trials = entry.partition(":")
    sys.argv = ["run_all_tasks1_26.py", *rest, "--task-start", task, "--task-end", task,
                "--out-root", f"{out_root}/task{task}", *(["--num-trials-per-task", trials] if trials else [])]
    run_all_tasks1_26.main()
'''


def assemble(dest: Path) -> Path:
    """A runnable RoboMemArena checkout (b175708) in `dest`."""
    subprocess.run([sys.executable, str(ASSEMBLE), str(dest)], check=True, capture_output=True, text=True)
    return dest


def copy_checkout(source: Path, dest: Path) -> Path:
    """A checkout whose scripts and BDDL folders are copies (to edit) and whose fork is a link."""
    (dest / "evaluation_benchmark").mkdir(parents=True)
    for part in ("scripts", "bddl", "async_vlm26_reference"):
        shutil.copytree(source / "evaluation_benchmark" / part, dest / "evaluation_benchmark" / part)
    (dest / "evaluation_benchmark" / "libero_fork").symlink_to(source / "evaluation_benchmark" / "libero_fork")
    return dest


def reference_env(checkout: Path, work: Path) -> dict[str, str]:
    """The environment RoboMemArena's runner needs here: the fork and scripts on the path, a gym alias and
    a LIBERO config pointing into the fork."""
    package = checkout / "evaluation_benchmark" / "libero_fork" / "libero"
    config = work / "libero-config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "config.yaml").write_text(yaml.safe_dump({
        "benchmark_root": str(package), "bddl_files": str(package / "bddl_files"),
        "init_states": str(package / "init_files"), "datasets": str(package.parent / "datasets"),
        "assets": str(package / "assets")}))
    alias = work / "gym-alias" / "gym"
    alias.mkdir(parents=True, exist_ok=True)
    (alias / "__init__.py").write_text("from gymnasium import *  # noqa\n")
    scripts = checkout / "evaluation_benchmark" / "scripts"
    path = [str(alias.parent), str(package.parent), str(scripts)]
    # No bytecode caches in the checkout, so that a test can tell whether the suite writes there.
    return dict(os.environ, PYTHONPATH=os.pathsep.join(path), LIBERO_CONFIG_PATH=str(config), MUJOCO_GL="egl",
                PYOPENGL_PLATFORM="egl", PYTHONDONTWRITEBYTECODE="1")


def run_reference(checkout: Path, work: Path, tasks: list[int] | dict[int, int], out_root: Path,
                  args: list[str]) -> subprocess.CompletedProcess[str]:
    """The checkout's run_all_tasks1_26.py with `args` for each of `tasks` (into out_root/task<id>), with the
    override call corrected (see DRIVER). A dict gives each task its own number of trials."""
    driver = work / "corrected_runner.py"
    driver.write_text(DRIVER)
    entries = [f"{task}:{trials}" for task, trials in tasks.items()] if isinstance(tasks, dict) else map(str, tasks)
    command = [sys.executable, str(driver), ",".join(entries), str(out_root), *args]
    return subprocess.run(command, cwd=work, env=reference_env(checkout, work), capture_output=True, text=True,
                          timeout=1800)


def episodes_tsv(out_root: Path) -> list[dict[str, str]]:
    with (out_root / "episodes.tsv").open(encoding="utf-8") as stream:
        return list(csv.DictReader(stream, delimiter="\t"))


def video_frames(path: Path) -> int:
    """Frames of one of the runner's videos: one per executed control after settling."""
    import imageio

    with imageio.get_reader(str(path)) as reader:
        return sum(1 for _ in reader)


def tree_state(root: Path) -> dict[str, tuple[int, int]]:
    """Every file and folder under `root` (links not followed) with its size and modification time."""
    state = {}
    for folder, names, files in os.walk(root):
        for name in [*names, *files]:
            path = Path(folder) / name
            info = path.lstat()
            state[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns)
    return state


def interpreter_wrapper(folder: Path, marker: Path) -> Path:
    """An executable that notes its arguments in `marker`, then runs this interpreter with them."""
    folder.mkdir(parents=True, exist_ok=True)
    wrapper = folder / "python-wrapper"
    wrapper.write_text(f'#!/bin/sh\necho "$@" >> "{marker}"\nexec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    return wrapper


def log_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
