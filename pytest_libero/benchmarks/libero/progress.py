"""Goal progress of a LIBERO episode: each predicate of the task's BDDL goal, control by control.

A BDDL goal is a conjunction of predicates. LIBERO's success check (`_check_success` of every
problem class, in LIBERO and LIBERO-plus alike) evaluates each goal predicate with
`self._eval_predicate(state)` and ANDs the results without short-circuit
(`result = self._eval_predicate(state) and result`), and it runs on every control: from
`reward()` and again from `BDDLBaseDomain.step`, whose answer is the `done` this suite calls
success. So the values are read, not recomputed: `GoalTap` wraps `_eval_predicate` on the
environment INSTANCE (never the class) and keeps the last value each predicate returned; after a
control they are the values of the very check that decided `done`. A predicate the check did not
evaluate at that control (a problem class that short-circuits; none of the installed ones does)
is evaluated here with the same `_eval_predicate`. Success stays LIBERO's `_check_success`,
untouched: the wrapper returns what LIBERO returns.

This module imports nothing of LIBERO: the service module hands it the native environment.
The record's `progress` block (docs/results-format.md) is `ProgressTrack.block()`.
"""

from __future__ import annotations

from typing import Any, Sequence


class GoalTap:
    """The goal predicates' values as LIBERO's own success check last evaluated them.

    Installed once per native environment (the inner BDDL domain, `env.env`); the environment
    cache keeps it beside the environment, so a reused environment is never wrapped twice.
    """

    def __init__(self, inner_env: Any) -> None:
        self.inner = inner_env
        self.values: dict[tuple[str, ...], bool] = {}
        self.evaluate = type(inner_env)._eval_predicate  # the class's own method, unwrapped
        self.evaluated_here = 0  # predicates the success check skipped, evaluated by `read`
        values, evaluate = self.values, self.evaluate

        def tapped(state: Any) -> Any:
            held = evaluate(inner_env, state)
            values[tuple(state)] = bool(held)
            return held  # exactly LIBERO's value: success is unchanged

        inner_env._eval_predicate = tapped

    @staticmethod
    def applies(inner_env: Any) -> bool:
        """Whether the environment has a BDDL goal evaluated by `_eval_predicate` (LIBERO's domains)."""
        problem = getattr(inner_env, "parsed_problem", None)
        return (callable(getattr(type(inner_env), "_eval_predicate", None)) and isinstance(problem, dict)
                and isinstance(problem.get("goal_state"), list))

    def goal(self) -> list[Any]:
        """The goal predicates as LIBERO parsed them (lists of lower-cased tokens)."""
        return list(self.inner.parsed_problem["goal_state"])

    def clear(self) -> None:
        """Forget the values: called before each control, so only that control's check counts."""
        self.values.clear()

    def read(self, goal: Sequence[Any]) -> list[bool]:
        """Each goal predicate's value at the current state: the success check's, else evaluated now."""
        found = []
        for state in goal:
            held = self.values.get(tuple(state))
            if held is None:
                held = bool(self.evaluate(self.inner, state))
                self.evaluated_here += 1
            found.append(held)
        return found


def predicate_text(state: Sequence[Any]) -> str:
    """A parsed predicate as BDDL text: ['on', 'akita_black_bowl_1', 'plate_1'] -> '(on akita_black_bowl_1 plate_1)'."""
    return "(" + " ".join(str(token) for token in state) + ")"


class ProgressTrack:
    """One episode's goal progress, fed after the settling and after every executed control.

    `first_control` counts executed controls as the record's counters do (the first policy
    control is 1); settling controls are not the policy's, so a predicate that already holds at
    the first observation (after settling) gets first_control 0, whichever settling control made
    it hold.
    """

    def __init__(self, tap: GoalTap) -> None:
        self.tap = tap
        self.goal = tap.goal()
        self.first: list[int | None] = [None] * len(self.goal)
        self.held: list[bool] = [False] * len(self.goal)
        self.most = 0

    def observe(self, control: int) -> None:
        """The predicates after `control` executed controls (0: at the first observation)."""
        held = self.tap.read(self.goal)
        for index, value in enumerate(held):
            if value and self.first[index] is None:
                self.first[index] = control
        self.held = held
        self.most = max(self.most, sum(held))

    def block(self) -> dict[str, Any] | None:
        """The record's `progress` block; None for a goal without predicates."""
        if not self.goal:
            return None
        n = len(self.goal)
        return {"predicates": [{"text": predicate_text(state), "held_at_end": held, "first_control": first}
                               for state, held, first in zip(self.goal, self.held, self.first, strict=True)],
                "fraction_at_end": sum(self.held) / n, "max_fraction": self.most / n}
