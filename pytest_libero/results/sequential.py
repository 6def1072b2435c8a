"""A run of policy B against a finished run A that stops when decided: its settings, the fixed
order of A's cells, the pairs consumed in that order, and the record of the decision.

One function consumes the pairs (`Against.advance`), used by the controller during the run and by
summary.json and `compare` afterwards, so the verdict written during a run is the one any later
rebuild derives from run.json, A's records and B's records. Pairs are consumed strictly in the
fixed order: a B episode that completes before an earlier one waits for it, so the verdict never
depends on worker timing. The statistics are core.sequential's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from pytest_libero.core.outcomes import COMPLETED, Outcome
from pytest_libero.core.sequential import TEST_NAME, Decision, Design, SequentialTest, stratified_order
from pytest_libero.errors import OptionError
from pytest_libero.results.files import write_json_atomic
from pytest_libero.results.reading import read_document

STOP_MODES = ("decided", "never")
# The order's seed when none is given: fixed so that two comparisons against one run A share an order.
DEFAULT_ORDER_SEED = 27
# Written by the controller when the comparison decides: xdist workers skip the items they still hold.
STOP_FILE = "sequential_stop.json"


@dataclass(frozen=True, slots=True)
class Settings:
    """The comparison settings of run B (run.json's "comparison")."""

    against: str  # run A's folder, absolute
    against_run_id: str | None
    against_identity: str
    stop: str = "decided"
    alpha: float = 0.05
    min_effect: float = 0.1
    power: float = 0.8
    order_seed: int = DEFAULT_ORDER_SEED

    def __post_init__(self) -> None:
        if self.stop not in STOP_MODES:
            raise OptionError(f"--libero-stop {self.stop}: choose one of {', '.join(STOP_MODES)}")
        for flag, value in (("--libero-alpha", self.alpha), ("--libero-power", self.power)):
            if not 0 < value < 1:
                raise OptionError(f"{flag} {value}: must be strictly between 0 and 1 (e.g. "
                                  f"{0.05 if flag == '--libero-alpha' else 0.8})")
        if not 0 < self.min_effect < 1:
            raise OptionError(f"--libero-min-effect {self.min_effect}: a difference of success rates strictly "
                              "between 0 and 1, e.g. 0.1 for ten percentage points")

    def design(self, cells: int) -> Design:
        """The test's design; the cap is A's cells (so a comparison that runs them all ends undecided)."""
        return Design.for_power(self.power, self.alpha, self.min_effect, max(cells, 1))

    def as_dict(self) -> dict[str, Any]:
        return {"test": TEST_NAME, "against": self.against, "against_run_id": self.against_run_id,
                "against_identity": self.against_identity, "stop": self.stop, "alpha": self.alpha,
                "min_effect": self.min_effect, "power": self.power, "beta": round(1 - self.power, 12),
                "order_seed": self.order_seed}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Settings:
        return cls(data["against"], data.get("against_run_id"), data["against_identity"], data["stop"],
                   data["alpha"], data["min_effect"], data["power"], data["order_seed"])


def pair_value(outcome: str | None) -> bool | None:
    """A completed episode's success (True/False); None for one that errored or never ran."""
    if outcome is None or outcome == Outcome.NOT_RUN.value:
        return None
    found = Outcome(outcome)
    return found == Outcome.SUCCESS if found in COMPLETED else None


def has_ended(outcome: str | None) -> bool:
    """Whether B's episode of a cell is over (an outcome other than never run): its pair can be consumed."""
    return outcome is not None and outcome != Outcome.NOT_RUN.value


@dataclass(frozen=True, slots=True)
class Against:
    """Run A's side of a comparison: the fixed order of its cells and its outcome on each."""

    settings: Settings
    order: tuple[str, ...]
    a: Mapping[str, bool | None]  # None: A errored or never ran the cell (the pair is errored)

    @classmethod
    def build(cls, settings: Settings, cells: list[str], labels: Mapping[str, str],
              records_a: Mapping[str, Mapping[str, Any]]) -> Against:
        """A's cells (its selection) in the stratified order, each task's cells dealt evenly."""
        order = stratified_order(((cell, labels[cell]) for cell in cells), settings.order_seed)
        a = {cell: pair_value((records_a.get(cell) or {}).get("outcome", {}).get("outcome")) for cell in order}
        return cls(settings, order, a)

    def start(self) -> SequentialTest:
        return SequentialTest(self.settings.design(len(self.order)))

    def advance(self, test: SequentialTest, b: Mapping[str, str]) -> SequentialTest:
        """The test after every pair whose B episode has ended, in order, up to the first one that has
        not (`b`: B's outcome by cell) or the decision."""
        done = len(test.steps)
        while done < len(self.order) and test.decision is Decision.CONTINUE and has_ended(b.get(self.order[done])):
            cell = self.order[done]
            test = test.update(self.a[cell], pair_value(b[cell]), cell)
            done += 1
        return test

    def block(self, b: Mapping[str, str]) -> dict[str, Any]:
        """summary.json's "sequential": the settings, every step, the stopping point and the verdict."""
        test = self.advance(self.start(), b)
        consumed = {step.cell for step in test.steps}
        waiting = next((cell for cell in self.order if cell not in consumed), None)
        stopped = test.decision.stops
        return {**self.settings.as_dict(), **test.record(), "order_cells": len(self.order),
                "boundary_log_e": test.design.boundary, "futility_boundary_log_e": test.design.futility_boundary,
                "stopped": stopped and self.settings.stop == "decided",
                "stop_message": stop_message(test) if stopped else None,
                "waiting_for": waiting if test.decision is Decision.CONTINUE else None,
                # Episodes of B past the consumed prefix: recorded, never part of the verdict.
                "not_counted": [cell for cell in self.order if cell not in consumed and has_ended(b.get(cell))],
                "verdict": verdict_text(test, len(self.order)),
                "effect": effect_of(test)}


def effect_of(test: SequentialTest) -> dict[str, Any]:
    """The block's "effect": B - A over the consumed pairs, with its anytime-valid interval at the
    design's alpha (core.confidence: valid at this stop) and the fixed-n one beside it."""
    # Imported here: this module loads with the plugin's options on every pytest start.
    from pytest_libero.core.confidence import effect

    kinds = [step.kind for step in test.steps]
    return effect(kinds.count("both"), kinds.count("only A"), kinds.count("only B"), kinds.count("neither"),
                  test.design.alpha)


def effect_text(block: Mapping[str, Any]) -> str | None:
    """`effect B - A +50.0 pp over 16 pairs; anytime-valid 95% interval [+2.7, +83.4] pp (a
    confidence sequence: valid at any stop, this one included); fixed-n 95% [...] pp (Newcombe; ...)`;
    None without pairs (or in a block written before the effect was recorded)."""
    found = block.get("effect") or {}
    if not found.get("pairs"):
        return None
    anytime, fixed = found["anytime_valid"], found["fixed_n"]

    def pp(values: list[float]) -> str:
        return f"[{100 * values[0]:+.1f}, {100 * values[1]:+.1f}]"

    return (f"effect B - A {100 * found['estimate']:+.1f} pp over {found['pairs']} pairs; anytime-valid "
            f"{100 * anytime['level']:g}% interval {pp(anytime['interval'])} pp (a confidence sequence: valid at any "
            f"stop, this one included); fixed-n 95% {pp(fixed['ci95'])} pp (Newcombe; not valid after a stop "
            "the data chose)")


def stop_message(test: SequentialTest) -> str:
    return f"stopped: decided ({test.decision.value} after {len(test.steps)} pairs)"


def verdict_text(test: SequentialTest, cells: int) -> str:
    used = f"{len(test.steps)} of {cells} pairs"
    if test.decision is Decision.CONTINUE:
        return f"not decided yet after {used}"
    if test.decision is Decision.UNDECIDED:
        return f"undecided after all {used}"
    return f"{test.decision.value} after {used}"


def lines(summary: Mapping[str, Any]) -> list[str]:
    """The terminal's lines: the verdict, pairs used of N, the statistic against its boundary."""
    block = summary.get("sequential")
    if not block:
        return []
    if block.get("error"):
        return [f"LIBERO sequential comparison: {block['error']}"]
    if block["decision"] == Decision.FUTILE.value:
        steps = block["steps"]
        where = (f"log F_B {steps[-1]['log_futility_b']:.2f}, log F_A {steps[-1]['log_futility_a']:.2f} >= "
                 f"log(1/beta) {block['futility_boundary_log_e']:.2f}: no difference of at least "
                 f"{block['min_effect']:g}")
    else:
        reached = ">=" if block["decision"] in (Decision.B_BETTER.value, Decision.A_BETTER.value) else "<"
        where = f"statistic {block['statistic']:.2f} {reached} boundary log(2/alpha) {block['boundary_log_e']:.2f}"
    first = f"LIBERO sequential comparison against {block['against']}: {block['verdict']}; {where}"
    second = (f"LIBERO sequential: {block['errored']} errored pair(s) (never discordant), "
              f"{len(block['not_counted'])} episode(s) past the consumed prefix not counted; alpha "
              f"{block['alpha']:g}, power {block['power']:g}, min effect {block['min_effect']:g}, order seed "
              f"{block['order_seed']}")
    third = effect_text(block)
    return [first, second] + ([f"LIBERO sequential: {third}"] if third else [])


def write_stop(run_dir: Path, message: str) -> None:
    write_json_atomic(run_dir / STOP_FILE, {"message": message})


def read_stop(run_dir: Path) -> str | None:
    """The stop message of a comparison that decided during this session (None: not stopped)."""
    found = read_document(str(run_dir / STOP_FILE))
    return str(found["message"]) if isinstance(found, dict) and "message" in found else None


def clear_stop(run_dir: Path) -> None:
    (run_dir / STOP_FILE).unlink(missing_ok=True)


def svg_points(block: Mapping[str, Any], key: str, width: float, height: float, top: float) -> str:
    """Polyline points of one statistic against pairs, scaled into a width x height box (y up to `top`)."""
    steps = block["steps"]
    n = max(len(steps), 1)
    points = [(0.0, height)] + [(width * (i + 1) / n, height - height * max(step[key], 0.0) / top)
                                for i, step in enumerate(steps)]
    return " ".join(f"{x:.1f},{y:.1f}" for x, y in points)


def plot_top(block: Mapping[str, Any]) -> float:
    values = [block["boundary_log_e"]] + [max(s["log_e_b"], s["log_e_a"]) for s in block["steps"]]
    return max(1.1 * max(values), 1.0) if all(map(math.isfinite, values)) else 1.0
