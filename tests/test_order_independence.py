"""Order independence: a cell's record does not depend on which cells ran before it in its bench service.

The same cells run forward, reversed and as two shards (`--libero-shard 1/2`, `2/2`), each arrangement
its own pytest run; every cell's outcome, counters, private hashes (final simulator state included),
observation and chunk digests and seeding must be equal in all of them (tests/order_helpers.py).

- RoboMemArena: tasks 22 and 25 of the issue's sequence (2,12,22,25, two trials, a scripted adapter
  that moves the arm). Before the services seeded the build, cell t25-seed50 built its environment
  from the random state t22-seed51's reset left and ended as env_error "RandomizationError: Cannot
  place all objects" whenever it followed t22-seed51; every episode re-seeded NumPy before its reset,
  so t22-seed51 alone before it reproduces the four-task sequence (checked on main 5668342: t22-seed51,
  t25-seed50 -> env_error). Here t25-seed50 runs after t22-seed51 (forward), first (reversed) and alone
  (shard 1/2).
- LIBERO: the development cells of the session's zero-policy run (conftest.zero_development_run,
  forward), reversed and as two shards. The LIBERO-plus selection is in tests/test_liberoplus_real.py,
  beside the run it reuses as its forward arrangement.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evidence_helpers import records, run_dirs
from order_helpers import ARRANGEMENTS, assert_same_records, run_arrangements
from robomemarena_helpers import ADAPTER

FORWARD = ["robomemarena-t22-seed51", "robomemarena-t25-seed50"]
# conftest.ZERO_DEVELOPMENT_RUN without its page (a differing copy changes the protocol identity, which
# the comparison checks).
ZERO_DEVELOPMENT_ARGS = ("--libero-scope", "development", "--libero-policy", "zero", "--libero-budget", "decisions",
                         "--libero-max-policy-calls", "3", "--libero-replan-interval", "5")


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TOX_ENV_DIR"}  # PYTEST_ADDOPTS: conftest's CHILD_ADDOPTS
    return dict(env, HOME=str(home), USERPROFILE=str(home), PY_COLORS="0")


@pytest.mark.real_libero
def test_robomemarena_cells_give_the_same_records_forward_reversed_and_in_two_shards(
        robomemarena_checkout: Path, tmp_path: Path) -> None:
    args = ("--libero-benchmark", "robomemarena", f"--libero-robomemarena-checkout={robomemarena_checkout}",
            "--libero-mode", "full", "--libero-robomemarena-trials", "2", "--libero-robomemarena-tasks", "22,25",
            "--libero-robomemarena-max-steps", "10", "--libero-policy", f"{ADAPTER}:build_adapter",
            "-k", " or ".join(cell.removeprefix("robomemarena-") for cell in FORWARD))
    runs = run_arrangements(tmp_path, args, {"forward": (), **ARRANGEMENTS}, env=_env(tmp_path))
    assert {name: run["order"] for name, run in runs.items()} == {
        "forward": FORWARD, "reversed": FORWARD[::-1], "shard 1/2": ["robomemarena-t25-seed50"],
        "shard 2/2": ["robomemarena-t22-seed51"]}, {name: run["stdout"][-2000:] for name, run in runs.items()}
    assert_same_records({name: run["records"] for name, run in runs.items()})
    for run in runs.values():
        for cell, record in run["records"].items():
            # The scripted arm runs its 10 controls in every arrangement: no placement failure anywhere.
            assert record["outcome"]["outcome"] == "failure", (cell, record["outcome"]["message"])
            assert record["counters"]["executed_controls"] == 10
            # Both cells are in the RoboMemArena reference's sample (catalog/fingerprints/): checked, matching.
            assert record["install"]["verdict"] == "matches", (cell, record["install"])
            assert record["seeding"] == {"seed": int(cell.rsplit("seed", 1)[1]),
                                         "generators": ["random", "numpy.random", "env.seed"],
                                         "points": ["build", "reset"]}
    first = runs["forward"]["records"]["robomemarena-t25-seed50"]
    assert "seeding" in dict(first["identities"]["protocol"]["settings"]["benchmark_options"])


@pytest.mark.real_libero
def test_libero_cells_give_the_same_records_forward_reversed_and_in_two_shards(
        zero_development_run: tuple[pytest.RunResult, Path], tmp_path: Path) -> None:
    _, forward_path = zero_development_run
    (forward_dir,) = run_dirs(forward_path / "reports")
    forward = records(forward_dir)
    assert sorted(forward) == ["libero_10-t00-s00", "libero_10-t01-s00"]
    args = ZERO_DEVELOPMENT_ARGS
    runs = run_arrangements(tmp_path, args, ARRANGEMENTS, env=_env(tmp_path))
    assert {name: run["order"] for name, run in runs.items()} == {
        "reversed": ["libero_10-t01-s00", "libero_10-t00-s00"], "shard 1/2": ["libero_10-t00-s00"],
        "shard 2/2": ["libero_10-t01-s00"]}, {name: run["stdout"][-2000:] for name, run in runs.items()}
    assert_same_records({"forward": forward, **{name: run["records"] for name, run in runs.items()}})
    for record in forward.values():
        assert record["seeding"]["seed"] == record["cell"]["seed"] == 20260907


@pytest.mark.real_libero  # robosuite (MuJoCo) in this process
def test_a_scene_that_cannot_be_placed_is_an_environment_fault_naming_the_sampler_the_same_way_each_time() -> None:
    """robosuite's own sampler, asked to place two boxes in a 1 mm square: its RandomizationError becomes
    PlacementFailed (an EnvironmentFault: the record's env_error) naming the sampler's class and name."""
    from robosuite.models.objects import BoxObject
    from robosuite.utils.placement_samplers import UniformRandomSampler

    from pytest_libero.benchmarks.seeding import PlacementFailed, placing, seed_simulator
    from pytest_libero.errors import EnvironmentFault

    boxes = [BoxObject(name=f"box{i}", size=[0.05, 0.05, 0.05]) for i in range(2)]
    sampler = UniformRandomSampler(name="TightTable", mujoco_objects=boxes, x_range=[0, 0.001], y_range=[0, 0.001],
                                   rotation=0, ensure_object_boundary_in_range=False, reference_pos=(0, 0, 0.8))
    messages = []
    for _ in range(2):
        seed_simulator(7)
        with pytest.raises(PlacementFailed) as caught:
            with placing("LIBERO", 7, "building the environment"):
                sampler.sample()
        assert isinstance(caught.value, EnvironmentFault)
        assert type(caught.value.__cause__).__name__ == "RandomizationError"
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    assert messages[0].startswith("LIBERO could not place the scene's objects while building the environment: "
                                  "robosuite.utils.placement_samplers.UniformRandomSampler 'TightTable' raised "
                                  "RandomizationError (Cannot place all objects"), messages[0]
    assert "at seed 7" in messages[0]
    with pytest.raises(ValueError, match="other"):  # anything else passes through unchanged
        with placing("LIBERO", 7, "building the environment"):
            raise ValueError("other")


def test_seeding_sets_pythons_and_numpys_generators_and_refuses_a_seed_they_cannot_take() -> None:
    import random

    import numpy as np

    from pytest_libero.benchmarks.seeding import seed_simulator, seeding_evidence
    from pytest_libero.errors import EnvironmentFault

    draws = []
    for _ in range(2):
        random.random(), np.random.random()  # whatever an earlier episode left
        seed_simulator(50)
        draws.append((random.random(), float(np.random.random())))
    random.seed(50)
    np.random.seed(50)
    assert draws[0] == draws[1] == (random.random(), float(np.random.random()))
    assert seeding_evidence(50) == {"seed": 50, "generators": ["random", "numpy.random", "env.seed"],
                                    "points": ["build", "reset"]}
    for bad in (-1, 2**32, 1.5, True, "50"):
        with pytest.raises(EnvironmentFault, match="cannot seed the simulator"):
            seed_simulator(bad)  # type: ignore[arg-type]


def test_robomemarenas_identity_names_the_seeding_and_resume_refuses_a_run_made_before_it(
        robomemarena_checkout: Path, tmp_path: Path) -> None:
    """Its cells' outcomes could change (a build that failed on an earlier episode's state now runs), so
    RoboMemArena's identity holds the seeding; a run recorded without it is refused, the setting named."""
    import json

    from pytest_libero.benchmarks.robomemarena import options
    from pytest_libero.benchmarks.robomemarena.adapter import ADAPTER as ARENA
    from pytest_libero.core.protocol import Protocol, setting_differences
    from pytest_libero.results.resume import ResumeRefused, completed_cells

    selection = options.select({"libero_robomemarena_checkout": str(robomemarena_checkout)})
    defaults = dict(scope="default", budget="horizon", replan_interval=5, max_policy_calls=None, track="rgb")
    now = Protocol(spec=ARENA.spec, **dict(defaults, **selection.protocol))
    assert ("seeding", options.SEEDING) in selection.protocol["benchmark_options"]
    unseeded = tuple(option for option in selection.protocol["benchmark_options"] if option[0] != "seeding")
    before = Protocol(spec=ARENA.spec, **dict(defaults, **dict(selection.protocol, benchmark_options=unseeded)))
    assert before.identity != now.identity
    assert setting_differences(before.as_dict(), now.as_dict(), "before", "now") == [
        f"benchmark_options.seeding: None before, {options.SEEDING!r} now"]
    old_run = tmp_path / "old-run"
    old_run.mkdir()
    (old_run / "run.json").write_text(json.dumps({"protocol": {"identity": before.identity,
                                                               "settings": before.as_dict()}}))
    with pytest.raises(ResumeRefused, match="benchmark_options.seeding"):
        completed_cells(old_run, now.as_dict(), now.identity, {})
