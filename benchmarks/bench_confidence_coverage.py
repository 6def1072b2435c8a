"""Coverage of the effect's intervals after a sequential stop (pytest_libero.core.confidence):
the anytime-valid confidence sequence against the fixed-n Newcombe interval, under optional stopping.

For each true effect it simulates `--runs` comparisons of i.i.d. pairs (A at `--baseline`, the
given `--discordance`), each up to `--pairs` pairs, and prints how often each interval held the
true effect when the comparison stopped

  peek     at the first of `--looks` evenly spaced looks at which the fixed-n interval excluded 0
           (a researcher checking a dashboard), else at the last look;
  test     where the suite's sequential test decided (alpha, power 0.8 against |effect|, 0.1 at no
           effect; capped at --pairs), else at the cap;
  always   (the confidence sequence only) at every one of the pairs at once: the strongest form,
           which implies coverage at any stopping time;

and the mean width of both intervals once all pairs are in (what anytime validity costs). Seeded:
the same table on every run.

    python benchmarks/bench_confidence_coverage.py
    python benchmarks/bench_confidence_coverage.py --effects 0,0.05,0.1 --runs 4000
"""

from __future__ import annotations

import argparse
import os
import time

from pytest_libero.core.confidence import coverage
from pytest_libero.core.sequential import PairModel


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--effects", default="0,0.1,0.2,0.3", help="true effects B - A, comma-separated")
    parser.add_argument("--baseline", type=float, default=0.5, help="A's success rate")
    parser.add_argument("--discordance", type=float, default=0.4, help="P(exactly one of A and B succeeds)")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--pairs", type=int, default=300)
    parser.add_argument("--looks", type=int, default=15)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    effects = [float(e) for e in args.effects.split(",")]
    level = 100 * (1 - args.alpha)
    print(f"A at {args.baseline:g}, discordance {args.discordance:g}; {args.runs} comparisons of up to {args.pairs} "
          f"pairs each, {args.looks} looks for peeking, seed {args.seed}; nominal {level:g}%; load "
          f"{' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"{'effect':>7} | {'peek: fixed-n':>13} {'anytime':>8} | {'test stop: fixed-n':>18} {'anytime':>8} | "
          f"{'always: anytime':>15} | {'width at cap: fixed-n':>21} {'anytime':>8}")
    for index, effect in enumerate(effects):
        started = time.perf_counter()
        found = coverage(PairModel(args.baseline, effect, args.discordance), args.alpha, args.runs, args.pairs,
                         args.looks, args.seed + index)
        print(f"{effect:>+7.2f} | {100 * found.peek_fixed:>12.1f}% {100 * found.peek_anytime:>7.1f}% | "
              f"{100 * found.test_fixed:>17.1f}% {100 * found.test_anytime:>7.1f}% | "
              f"{100 * found.always_anytime:>14.1f}% | {100 * found.mean_width_fixed:>18.1f} pp "
              f"{100 * found.mean_width_anytime:>5.1f} pp  ({time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
