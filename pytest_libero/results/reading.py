"""Reading thousands of episode records: parsed, checked against the schema, on every core.

A report, a merge, a resume's scan and the session end read every record of a run folder (10,030
for LIBERO-plus). Each record costs a file read, a JSON parse and a schema check (results/validation.py),
about 0.3 ms on this project's 2-core machine, so from `PARALLEL_FROM` records on, helper processes
(one per further core, at most `MAX_HELPERS`) take batches of files from the front while this
process works through them from the end. A batch is claimed by creating a file that must not exist
yet, so each batch is read exactly once; the helpers leave their results as pickles in a private
temporary folder; a batch a helper claimed but did not finish is read here; the list comes back in
file order.

The records come back without their evidence blocks (`observations`, `chunks`: nine tenths of a
record's bytes, and what a helper would otherwise pickle back): what is derived from records
(summary, page, merge, resume) never reads them. `read_document` gives a whole file.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from pytest_libero.results.validation import is_valid_record

EVIDENCE_BLOCKS = ("observations", "chunks")
PARALLEL_FROM = 1500  # records: below this, starting a helper (about 0.5 s) costs more than it saves
BATCH = 200  # records a helper reads per task
MAX_HELPERS = 3


def read_document(path: str) -> Any:
    """The JSON document in `path`, or None when it cannot be read. orjson parses a record about
    twice as fast as the json module; what orjson refuses and json takes (NaN, integers beyond 64
    bits, which a record may carry in `state` or `timing`) is read by json, so both read the same."""
    import orjson

    try:
        with open(path, "rb") as stream:
            data = stream.read()
    except OSError:
        return None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        pass
    try:
        return json.loads(data)
    except ValueError:  # UnicodeDecodeError too
        return None


def read_checked(paths: list[str]) -> list[dict[str, Any] | None]:
    """For each path, in order, its schema-valid record without the evidence blocks, or None
    (unreadable, not JSON or not a valid record)."""
    helpers = _helpers(len(paths))
    if helpers == 0:
        return _read_batch(paths)
    batches = [paths[start:start + BATCH] for start in range(0, len(paths), BATCH)]
    results: list[list[dict[str, Any] | None] | None] = [None] * len(batches)
    with tempfile.TemporaryDirectory(prefix="pytest-libero-read-") as folder:
        (Path(folder) / "batches.json").write_text(json.dumps(batches), encoding="utf-8")
        started = [process for process in (_start_helper(folder) for _ in range(helpers)) if process is not None]
        try:
            for index in reversed(range(len(batches))):  # this process works from the end ...
                if not _claim(folder, index):
                    break  # ... until it meets the helpers' batches
                results[index] = _read_batch(batches[index])
            for process in started:
                process.wait()
        finally:
            for process in started:
                if process.poll() is None:  # interrupted: no helper outlives the call
                    process.kill()
                    process.wait()
        for index, found in enumerate(results):
            if found is None:  # a helper's batch, or one a helper that died had claimed
                results[index] = _load_batch(folder, index)
                if results[index] is None:
                    results[index] = _read_batch(batches[index])
    return [record for batch in results for record in batch or ()]


def _start_helper(folder: str) -> subprocess.Popen[bytes] | None:
    """A helper process: a fresh interpreter running this module's `_helper_main` (a subprocess, not
    multiprocessing, which would import the caller's __main__ again in each helper)."""
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])))
    try:
        return subprocess.Popen([sys.executable, "-m", "pytest_libero.results.reading", folder],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, env=env)
    except OSError:  # no helper: this process reads every batch
        return None


def _claim(folder: str, index: int) -> bool:
    """Claim batch `index` for the calling process: creating a file that must not exist is atomic,
    so exactly one process reads each batch."""
    try:
        os.close(os.open(os.path.join(folder, f"{index}.claim"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def _load_batch(folder: str, index: int) -> list[dict[str, Any] | None] | None:
    try:
        with open(os.path.join(folder, f"{index}.pickle"), "rb") as stream:
            return pickle.load(stream)  # type: ignore[no-any-return]  # our own helper's, in our own folder
    except (OSError, EOFError, pickle.UnpicklingError):
        return None


def _helper_main(folder: str) -> None:
    """A helper's work: claim each batch it can, from the front, read it and leave the result beside
    the claim (written whole, then renamed). A batch already claimed (by the caller or another
    helper) is skipped: a claim costs one system call."""
    batches = json.loads((Path(folder) / "batches.json").read_text(encoding="utf-8"))
    for index, batch in enumerate(batches):
        if not _claim(folder, index):
            continue
        found = _read_batch(batch)
        part = os.path.join(folder, f"{index}.pickle.part")
        with open(part, "wb") as stream:
            pickle.dump(found, stream, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(part, os.path.join(folder, f"{index}.pickle"))


def _helpers(count: int) -> int:
    if count < PARALLEL_FROM:
        return 0
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(0, min(cores - 1, MAX_HELPERS))


def _read_batch(paths: list[str]) -> list[dict[str, Any] | None]:
    found: list[dict[str, Any] | None] = []
    with gc_paused():
        for path in paths:
            record = read_document(path)
            if record is None or not is_valid_record(record):
                found.append(None)
                continue
            for block in EVIDENCE_BLOCKS:
                record.pop(block, None)
            found.append(record)
    return found


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for a bulk step (reading thousands of records, building
    their summary), as it was before it. Decoded JSON holds no reference cycles, yet each collection
    walks every live object: with 10,000 records alive the collections took half the reading time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


if __name__ == "__main__":  # a helper of read_checked
    _helper_main(sys.argv[1])
