"""Make (or extend) a frozen install reference: catalog/fingerprints/<benchmark>-<renderer family>.json.

    python tools/make_fingerprints.py                       # LIBERO's plan, on this machine's renderer
    python tools/make_fingerprints.py --cells libero_10-t00-s00 libero_spatial-t00-s00
    python tools/make_fingerprints.py --out /tmp/fp          # a second reference, e.g. to measure noise

It drives the real bench service exactly as a run does (`start` with the fast-mode protocol: the
cell's seed, reset, released init state, ten settling controls [0,0,0,0,0,0,-1]), takes the
service's fingerprint (settled state digest, versions, GL backend, renderer string) and the first
delivered images' digests and summaries, then runs the doctor's probe (a short fixed arm-moving
action sequence, pytest_libero.core.fingerprint.PROBE_SEQUENCE) and keeps the final state digest.
The file is rewritten after every cell, so an interrupted run resumes where it stopped; cells
already present are skipped. A file made with another install (versions, GL backend, renderer) is
never extended: that would mix installs in one reference.

LIBERO's plan: each suite's tasks at init state 0 (130 cells) and init states 1, 25 and 49 of task
0 of each suite (15 cells). The NVIDIA reference is made by the same command on a GPU machine with
MUJOCO_GL=egl (docs/install-check.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "catalog" / "fingerprints"
LATER_INIT_STATES = (1, 25, 49)
TOLERANCE = {"channel_mean": 0.02, "thumbnail_block": 1.0}  # docs/install-check.md: how it was chosen


def libero_plan() -> list[tuple[str, int, int]]:
    from pytest_libero.benchmarks.libero import catalog

    # libero_10 first: the doctor's default cells are libero_spatial's and libero_10's task 0.
    suites = sorted(catalog.SUITES, key=lambda suite: suite not in ("libero_10", "libero_spatial"))
    plan = [(suite, entry["task_index"], 0) for suite in suites for entry in catalog.entries(suite)]
    plan += [(suite, 0, init) for suite in catalog.SUITES for init in LATER_INIT_STATES]
    return plan


def parse_cell(text: str) -> tuple[str, int, int]:
    from pytest_libero.core.cells import parse_cell_id

    parsed = parse_cell_id(text)
    if parsed is None:
        raise SystemExit(f"--cells {text!r}: not a cell id such as libero_10-t00-s00")
    return parsed[0], parsed[1], parsed[2]


def dump(document: dict[str, Any]) -> str:
    """The reference as JSON with one line per cell (small, and a cell's change is one diff line)."""
    head = {k: v for k, v in document.items() if k != "cells"}
    lines = [json.dumps(head, indent=1, sort_keys=True)[:-2] + ',\n "cells": {']
    cells = sorted(document["cells"].items())
    lines += [f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True, separators=(',', ':'))}"
              + ("," if i < len(cells) - 1 else "") for i, (k, v) in enumerate(cells)]
    return "\n".join(lines) + "\n }\n}\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", default="libero", choices=["libero"],
                        help="the benchmark (LIBERO; LIBERO-plus and RoboMemArena: not yet)")
    parser.add_argument("--cells", nargs="*", default=None, help="cell ids (default: the benchmark's plan)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"folder (default {DEFAULT_OUT})")
    parser.add_argument("--limit", type=int, default=None, help="stop after this many new cells")
    args = parser.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")

    from pytest_libero.benchmarks import get, service_env
    from pytest_libero.core.cells import FAST_SEED
    from pytest_libero.core.fingerprint import FORMAT, PROBE_SEQUENCE, protocol_key, renderer_family
    from pytest_libero.core.protocol import SETTLE_CONTROLS
    from pytest_libero.runtime.doctor import fingerprint_cell, reference_entry
    from pytest_libero.runtime.service import BenchService

    adapter = get(args.benchmark)
    plan = [parse_cell(c) for c in args.cells] if args.cells else libero_plan()
    settle = protocol_key(SETTLE_CONTROLS, adapter.spec.settle_action)
    args.out.mkdir(parents=True, exist_ok=True)
    service = BenchService(env=service_env(adapter, None))
    path: Path | None = None
    document: dict[str, Any] | None = None
    made = 0
    try:
        for suite, task, init in plan:
            cell_id = f"{suite}-t{task:02d}-s{init:02d}"
            if document is not None and cell_id in document["cells"]:
                continue
            tick = time.perf_counter()
            got = fingerprint_cell(service, cell_id, settle)
            install = got["observed"]["install"]
            if document is None:
                family = renderer_family(install["renderer"])
                if family is None:
                    raise SystemExit(f"renderer {install['renderer']!r} is of no known family (llvmpipe, nvidia)")
                path = args.out / f"{args.benchmark}-{family}.json"
                document = json.loads(path.read_text()) if path.exists() else {
                    "format": FORMAT, "benchmark": args.benchmark, "renderer_family": family, "made_with": install,
                    "protocol": dict(settle, seed=FAST_SEED), "probe": [[n, list(a)] for n, a in PROBE_SEQUENCE],
                    "tolerance": TOLERANCE, "cells": {}}
                if document["made_with"] != install:
                    raise SystemExit(f"{path} was made with {document['made_with']}, this install is {install}: "
                                     "write another folder (--out) instead of mixing installs")
                if cell_id in document["cells"]:
                    continue
            elif install != document["made_with"]:
                raise SystemExit(f"the install changed during the run: {install}")
            document["cells"][cell_id] = reference_entry(got)
            assert path is not None
            tmp = path.with_suffix(".tmp")
            tmp.write_text(dump(document))
            tmp.replace(path)
            made += 1
            print(f"{cell_id}: {time.perf_counter() - tick:.1f} s ({len(document['cells'])} cells)", flush=True)
            if args.limit is not None and made >= args.limit:
                break
    finally:
        service.close()
    print(f"{made} new cell(s) in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
