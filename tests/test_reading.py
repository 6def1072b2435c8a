"""Reading thousands of records (results/reading.py): helper processes give exactly what one process
reads, in file order, and a helper that dies loses nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from pytest_libero.results import reading


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A synthetic run folder of 40 real records, plus a file that is not JSON, a record the schema
    refuses and an empty file."""
    from synthetic_runs import write_libero_run

    (run,) = write_libero_run(tmp_path_factory.mktemp("reading") / "run", count=40, controls=20)
    episodes = run / "episodes"
    (episodes / "aa-not-json.json").write_text("{not json")
    broken = json.loads((episodes / "libero_spatial-t00-s00.json").read_text())
    broken["outcome"]["outcome"] = 7
    (episodes / "zy-broken.json").write_text(json.dumps(broken))
    (episodes / "zz-empty.json").write_text("")
    return run


def paths_of(run):
    episodes = run / "episodes"
    return [str(episodes / name) for name in sorted(os.listdir(episodes))]


def serial(paths):
    return reading._read_batch(paths)


def test_records_come_checked_and_without_their_evidence_blocks(folder):
    paths = paths_of(folder)
    found = serial(paths)
    assert len(found) == 43 and sum(r is None for r in found) == 3
    assert found[0] is None and found[-2] is None and found[-1] is None  # not JSON; refused; empty
    whole = json.loads(open(paths[1]).read())
    assert {"observations", "chunks"} <= set(whole) and found[1] == {
        k: v for k, v in whole.items() if k not in ("observations", "chunks")}


def test_helper_processes_read_what_one_process_reads_in_file_order(folder, monkeypatch):
    paths = paths_of(folder)
    monkeypatch.setattr(reading, "PARALLEL_FROM", 1)
    monkeypatch.setattr(reading, "BATCH", 4)  # 11 batches
    monkeypatch.setattr(reading, "_helpers", lambda count: 2)
    claim, loaded = reading._claim, []

    def claim_after_a_helper(folder_path, index):
        """This process's first claim waits until a helper has claimed batch 0 (its first): the
        helpers then surely take part, however slowly they start."""
        deadline = time.monotonic() + 120
        while not os.path.exists(os.path.join(folder_path, "0.claim")):
            assert time.monotonic() < deadline, "no helper claimed a batch in 120 s"
            time.sleep(0.05)
        return claim(folder_path, index)

    def load(folder_path, index):
        found = load_batch(folder_path, index)
        loaded.append(index)
        return found

    load_batch = reading._load_batch
    monkeypatch.setattr(reading, "_claim", claim_after_a_helper)
    monkeypatch.setattr(reading, "_load_batch", load)
    assert reading.read_checked(paths) == serial(paths)
    assert 0 in loaded  # batch 0 came from a helper's pickle


def test_batches_a_dead_helper_claimed_are_read_by_the_caller(folder, monkeypatch):
    paths = paths_of(folder)
    monkeypatch.setattr(reading, "PARALLEL_FROM", 1)
    monkeypatch.setattr(reading, "BATCH", 4)
    monkeypatch.setattr(reading, "_helpers", lambda count: 1)

    def dying_helper(folder_path):
        """Claims batches 0 and 1, then exits without a result (killed mid-batch)."""
        claim = ("import os, sys\n"
                 "for i in (0, 1):\n"
                 "    path = os.path.join(sys.argv[1], f'{i}.claim')\n"
                 "    os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))\n"
                 "sys.exit(9)\n")
        process = subprocess.Popen([sys.executable, "-c", claim, folder_path])
        process.wait()
        return process

    monkeypatch.setattr(reading, "_start_helper", dying_helper)
    assert reading.read_checked(paths) == serial(paths)


def test_read_records_reads_a_large_folder_with_helpers_as_without(folder, monkeypatch):
    """The summary's reader, end to end (its helpers are real subprocesses of this module)."""
    from pytest_libero.results.summary import read_records

    alone = read_records(folder)
    monkeypatch.setattr(reading, "PARALLEL_FROM", 1)
    monkeypatch.setattr(reading, "BATCH", 3)
    monkeypatch.setattr(reading, "_helpers", lambda count: 1)
    helped = read_records(folder)
    assert helped == alone
    assert len(alone[0]) == 40 and len(alone[2]) == 3
