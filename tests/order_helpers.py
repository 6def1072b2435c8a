"""Order-independence helpers: the same cells run forward, reversed and as two shards, records compared.

Each arrangement is its own pytest run in a fresh process (its own bench service), started together
so that they share the machine's cores. "Reversed" reverses the collected items with a conftest.py in
the run's folder (pytest's own hook; the plugin runs items in the order pytest hands them over);
"shard K/2" is `--libero-shard K/2`. What must be equal for every cell is what the episode produced:
its cell, protocol identity, outcome, counters, private hashes (the final simulator state's among
them), the delivered observations' and returned chunks' digests, and the seeding. Timing, the
worker, the scheduler block and `compute.env_reused` say where and how fast it ran, and may differ.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from evidence_helpers import records, run_dirs

REVERSE_CONFTEST = '''
def pytest_collection_modifyitems(items):
    items.reverse()  # the same cells, in reverse order
'''

COMPARED = ("cell", "outcome", "counters", "private", "observations", "chunks", "seeding")

ARRANGEMENTS = {"reversed": (), "shard 1/2": ("--libero-shard", "1/2"), "shard 2/2": ("--libero-shard", "2/2")}


def comparable(record: dict[str, Any]) -> dict[str, Any]:
    """What must not depend on where or after what the cell ran."""
    return {"identity": record["identities"]["protocol"]["identity"], **{k: record.get(k) for k in COMPARED}}


def run_arrangements(base: Path, args: tuple[str, ...], arrangements: dict[str, tuple[str, ...]],
                     env: dict[str, str] | None = None, files: dict[str, str] | None = None,
                     timeout: float = 900) -> dict[str, dict[str, Any]]:
    """Each arrangement (name -> extra arguments; 'reversed' gets the reversing conftest) as its own
    pytest run in base/<name> (holding `files`: name -> text), all started at once:
    {name: {"records", "order", "stdout", "wall_s"}}."""
    started: dict[str, tuple[subprocess.Popen[str], Path, float]] = {}
    for name, extra in arrangements.items():
        folder = base / re.sub(r"\W", "-", name)
        folder.mkdir(parents=True)
        for file, text in (files or {}).items():
            (folder / file).write_text(text, encoding="utf-8")
        if name == "reversed":
            (folder / "conftest.py").write_text(REVERSE_CONFTEST, encoding="utf-8")
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-v", "--libero-video", "none",
                   f"--libero-output={folder / 'reports'}", *args, *extra]
        process = subprocess.Popen(command, cwd=folder, env=dict(env or os.environ, PYTHONPATH=str(folder)),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        started[name] = (process, folder, time.monotonic())
    done: dict[str, dict[str, Any]] = {}
    for name, (process, folder, start) in started.items():
        stdout, _ = process.communicate(timeout=timeout)
        wall = time.monotonic() - start
        (run_dir,) = run_dirs(folder / "reports")
        order = re.findall(r"::test_rollout\[([^\]]+)\] (?:PASSED|FAILED|ERROR|SKIPPED)", stdout)
        done[name] = {"records": records(run_dir), "order": order, "stdout": stdout, "wall_s": wall}
    return done


def assert_same_records(arrangements: dict[str, dict[str, dict[str, Any]]]) -> None:
    """Every cell's comparable record is the same in every arrangement that ran it (each cell at least twice)."""
    by_cell: dict[str, dict[str, dict[str, Any]]] = {}
    for name, found in arrangements.items():
        for cell, record in found.items():
            by_cell.setdefault(cell, {})[name] = comparable(record)
    for cell, seen in by_cell.items():
        assert len(seen) >= 2, f"{cell} ran only in {list(seen)}"
        (first_name, first), *rest = seen.items()
        for name, other in rest:
            differing = [k for k in first if first[k] != other[k]]
            shown = {k: (first[k], other[k]) for k in differing if k in ("outcome", "counters", "private")}
            assert not differing, f"{cell}: {', '.join(differing)} differ between {first_name} and {name}: {shown}"
