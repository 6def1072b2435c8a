"""Seeding the simulator side from the cell: shared by the service modules of robosuite benchmarks.

A bench service runs many episodes in one process, and robosuite, LIBERO, LIBERO-plus and
RoboMemArena's fork draw from process-wide generators: the object placement samplers
(robosuite's ObjectPositionSampler and LIBERO's region samplers), robosuite's initialization
noise and LIBERO-plus's sensor noise all call NumPy's global generator, and `env.seed(seed)` is
LIBERO's `np.random.seed(seed)`. Left alone, the state they start from is whatever the previous
episode left, so a cell's scene could depend on which cells ran before it in the same service
(the task order, `-n`, `--libero-shard`, resume).

So every generator the simulator side may draw from (Python's `random` and NumPy's global one;
robosuite 1.4 and the LIBERO packages have no generator of their own) is set to the cell's seed
(the record's `cell.seed`, the `env.seed` of the episode) before the environment is built (or
taken from the service's cache) and again just before its reset (docs/how-it-works.md, "Seeding").
No simulator import here: this works on the process's generators and on exceptions.
"""

from __future__ import annotations

import contextlib
import random
import types
from typing import Any, Iterator

import numpy as np

from pytest_libero.errors import EnvironmentFault

# What seed_simulator sets, in the order it sets them (the documentation's list).
SEEDED_GENERATORS = ("random", "numpy.random")


# Where the services seed: before the build (or the cache) and before the reset.
SEED_POINTS = ("build", "reset")


def seeding_evidence(seed: int, env_seed: bool = True) -> dict[str, Any]:
    """The record's `seeding` block: the seed, what it was set on and when."""
    return {"seed": int(seed), "generators": [*SEEDED_GENERATORS, *(["env.seed"] if env_seed else [])],
            "points": list(SEED_POINTS)}


def seed_simulator(seed: int) -> None:
    """Set every process-wide generator the simulator side may draw from to `seed`."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or not 0 <= int(seed) < 2**32:
        raise EnvironmentFault(f"cell seed {seed!r} cannot seed the simulator: use an integer in 0..2**32-1")
    random.seed(int(seed))
    np.random.seed(int(seed))


class PlacementFailed(EnvironmentFault):
    """The benchmark's object placement sampler could not place the scene (robosuite's RandomizationError)."""


def _sampler_in(tb: types.TracebackType | None) -> Any:
    """The innermost placement sampler (an object whose class name ends in 'Sampler') in a traceback."""
    found = None
    while tb is not None:
        candidate = tb.tb_frame.f_locals.get("self")
        if candidate is not None and type(candidate).__name__.endswith("Sampler"):
            found = candidate
        tb = tb.tb_next
    return found


def placement_fault(exc: BaseException, benchmark: str, seed: int, phase: str) -> EnvironmentFault | None:
    """A PlacementFailed naming the sampler when `exc` is a placement failure (RandomizationError), else None."""
    if type(exc).__name__ != "RandomizationError":
        return None
    sampler = _sampler_in(exc.__traceback__)
    if sampler is None:
        where = "its object placement sampler"
    else:
        kind = type(sampler)
        name = getattr(sampler, "name", None)
        where = f"{kind.__module__}.{kind.__qualname__}" + (f" {name!r}" if isinstance(name, str) else "")
    message = str(exc).strip() or "Cannot place all objects"
    return PlacementFailed(
        f"{benchmark} could not place the scene's objects while {phase}: {where} raised RandomizationError "
        f"({message}) at seed {seed}. Every generator is seeded from the cell before the build and the reset, "
        "so this cell fails the same way in any order, shard or resume; choose another seed or report the "
        "scene to the benchmark")


@contextlib.contextmanager
def placing(benchmark: str, seed: int, phase: str) -> Iterator[None]:
    """Turn a placement failure inside the block into PlacementFailed (other exceptions pass unchanged)."""
    try:
        yield
    except Exception as exc:
        fault = placement_fault(exc, benchmark, seed, phase)
        if fault is None:
            raise
        raise fault from exc
