"""The frozen schedules: every number of every preset, checked against the harnesses' facts.

The table below is written from the harnesses' own sources (cited in docs/schedules-and-compare.md), not from
tools/build_schedules.py, so a slip in either shows up here.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from pytest_libero.benchmarks.libero import catalog
from pytest_libero.core import schedules
from pytest_libero.__main__ import main
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol
from pytest_libero.core.data import SCHEMA_DIR

ROOT = Path(__file__).resolve().parents[1]
OPEN_NOOP = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]

# name: (caps spatial/object/goal/libero_10/libero_90, settle controls, settle action, episodes per task,
#        default run seeds, env-seed rule, fixed env seed, replan interval K, observation track)
# Sources: OpenVLA run_libero_eval.py (one action per query, env.seed(0)); OpenVLA-OFT's
# (num_open_loop_steps 8, use_proprio with two images); openpi examples/libero/main.py
# (replan_steps 5, observation/state); LeRobot envs/libero.py (spatial 280, seed 1000 + episode,
# n_action_steps 10 in the pi0.5 reproduction) and its LIBERO docs page (--eval.n_episodes=10);
# LIBERO's lifelong evaluator (600, 5 x zeros, n_eval 20, seed 10000, a query per step, joint and
# gripper states).
FACTS = {
    "standard": ((220, 280, 300, 520, 400), 10, OPEN_NOOP, 50, [7], "run_seed", None, 5, "rgb"),
    "openvla": ((220, 280, 300, 520, 400), 10, OPEN_NOOP, 50, [7], "fixed", 0, 1, "rgb"),
    "oft": ((220, 280, 300, 520, 400), 10, OPEN_NOOP, 50, [7], "fixed", 0, 8, "openpi-compat"),
    "openpi": ((220, 280, 300, 520, 400), 10, OPEN_NOOP, 50, [7], "run_seed", None, 5, "openpi-compat"),
    "lerobot": ((280, 280, 300, 520, 400), 10, OPEN_NOOP, 50, [1000], "run_seed_plus_init_index", None, 10,
                "openpi-compat"),
    "lerobot-docs": ((280, 280, 300, 520, 400), 10, OPEN_NOOP, 10, [1000], "run_seed_plus_init_index", None, 10,
                     "openpi-compat"),
    "libero-native": ((600, 600, 600, 600, 600), 5, [0.0] * 7, 20, [10000], "run_seed", None, 1, "rgb+proprio"),
}
CAP_ORDER = ("libero_spatial", "libero_object", "libero_goal", "libero_10", "libero_90")
TASKS = {"libero_spatial": 10, "libero_object": 10, "libero_goal": 10, "libero_10": 10, "libero_90": 90}
SCHEMA = json.loads((SCHEMA_DIR / "schedule.schema.json").read_text())


def test_the_catalog_holds_exactly_the_seven_presets():
    assert schedules.names() == sorted(FACTS)


@pytest.mark.parametrize("name", sorted(FACTS))
def test_every_number_of_the_schedule_matches_the_harness(name):
    caps, settle, action, episodes, seeds, rule, fixed, replan, track = FACTS[name]
    document = schedules.document(name)
    assert document["replan_interval"]["value"] == replan and document["replan_interval"]["source"].strip()
    assert document["observation_track"]["value"] == track and document["observation_track"]["source"].strip()
    assert document["adapter_duties"]["items"] and document["adapter_duties"]["source"].strip()
    loaded = schedules.load(name)
    assert (loaded.replan_interval, loaded.track) == (replan, track)
    assert loaded.identity()["replan_interval"] == replan and loaded.identity()["track"] == track
    jsonschema.Draft202012Validator(SCHEMA).validate(document)
    assert document["default_suites"] == ["libero_spatial", "libero_object", "libero_goal", "libero_10"]
    assert document["settle_counts_against_cap"] is False
    assert document["seeds"]["default"] == seeds
    assert document["seeds"]["env_seed"]["rule"] == rule
    assert document["seeds"]["env_seed"].get("value") == fixed
    expected_caps = dict(zip(CAP_ORDER, caps, strict=True))
    assert set(document["suites"]) == set(catalog.ALL_SUITES)  # 5 standard + 16 LIBERO-PRO suites
    for suite, plan in document["suites"].items():
        base = catalog.base_suite(suite)
        assert plan["cap"] == expected_caps[base], suite
        assert plan["tasks"] == list(range(TASKS[base])), suite
        assert plan["init_states"] == list(range(episodes)), suite  # episode i on init state i, in order
        assert plan["settle_controls"] == settle, suite
        assert plan["settle_action"] == action, suite
        for key in ("cap_source", "settle_source", "init_states_source"):
            assert plan[key].strip(), (suite, key)
    assert document["seeds"]["source"].strip() and document["seeds"]["env_seed"]["source"].strip()


def test_env_seed_rules():
    assert schedules.load("openvla").env_seed(7, 13) == 0  # env.seed(0) hard-coded
    assert schedules.load("openpi").env_seed(7, 13) == 7  # env.seed(seed)
    assert schedules.load("lerobot").env_seed(1000, 13) == 1013  # reset(seed = start + episode index)
    assert schedules.load("libero-native").env_seed(10000, 13) == 10000
    assert schedules.load("oft").env_seed(8, 13) == 0
    assert schedules.load("lerobot-docs").env_seed(1000, 9) == 1009


def test_the_schema_names_exactly_the_harness_tracks():
    from pytest_libero.core.contract import TRACKS

    assert SCHEMA["properties"]["observation_track"]["properties"]["value"]["enum"] == list(TRACKS)


def test_default_schedule_is_the_common_published_protocol():
    standard = schedules.load(schedules.DEFAULT_SCHEDULE)
    assert standard.name == "standard"
    episodes = sum(len(standard.plan(s).tasks) * len(standard.plan(s).init_states) for s in standard.default_suites)
    assert episodes == 2000


def test_schedule_files_are_what_the_build_tool_writes():
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "build_schedules.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", sorted(FACTS))
def test_schedule_command_prints_every_suite_with_its_cap(name, capsys):
    assert main(["schedule", name]) == 0
    out = capsys.readouterr().out
    caps, settle, _, episodes, seeds, rule, fixed, replan, track = FACTS[name]
    expected_caps = dict(zip(CAP_ORDER, caps, strict=True))
    assert f"schedule {name}:" in out
    assert f"replan interval K: {replan} controls per chunk" in out
    assert f"observation track: {track} (" in out
    assert "adapter duties" in out
    assert {"fixed": f"env.seed({fixed}) whatever the run seed", "run_seed": "env.seed(run seed)",
            "run_seed_plus_init_index": "env.seed(run seed + init-state index)"}[rule] in out
    for duty in schedules.load(name).adapter_duties:
        assert f"  - {duty}" in out
    assert f"settling: {settle} controls" in out
    for suite in catalog.ALL_SUITES:
        row = next(line for line in out.splitlines() if line.startswith(suite + " "))
        fields = row.split()
        assert fields[2] == f"0-{episodes - 1}", row
        assert int(fields[4]) == expected_caps[catalog.base_suite(suite)], row
    assert f"run seeds {', '.join(map(str, seeds))} by default" in out


def test_schedule_command_names_the_choices_for_an_unknown_schedule(capsys):
    assert main(["schedule", "openvla-oft"]) == 2
    err = capsys.readouterr().err
    assert "unknown schedule 'openvla-oft'" in err and "openvla" in err and "libero-native" in err


def test_protocol_identity_covers_schedule_name_content_and_seeds():
    base = Protocol("default", "horizon", 5, None, spec=LIBERO_SPEC, mode="full", schedule="standard", seeds=(7,))
    assert base.identity != Protocol("default", "horizon", 5, None, spec=LIBERO_SPEC, mode="full", schedule="openpi",
                                     seeds=(7,)).identity
    assert base.identity != Protocol("default", "horizon", 5, None, spec=LIBERO_SPEC, mode="full", schedule="standard",
                                     seeds=(7, 8)).identity
    settings = base.as_dict()
    assert settings["schedule"]["name"] == "standard"
    assert settings["schedule"]["sha256"] == schedules.load("standard").sha256
    assert settings["schedule"]["caps"]["libero_spatial"] == 220
    assert base.control_cap("libero_spatial_swap") == 220
    lerobot = Protocol("default", "horizon", 5, None, spec=LIBERO_SPEC, mode="full", schedule="lerobot", seeds=(1000,))
    assert lerobot.control_cap("libero_spatial") == 280
    assert "TASK_SUITE_MAX_STEPS" in lerobot.cap_source("libero_spatial")
    decisions = Protocol("default", "decisions", 5, 3, spec=LIBERO_SPEC, mode="full", schedule="lerobot", seeds=(1000,))
    assert decisions.control_cap("libero_spatial") == 15 and decisions.identity != lerobot.identity


def test_fast_mode_identity_is_unchanged_by_schedules():
    # The identity fast-mode runs had before full mode existed: resuming and merging them still work.
    assert Protocol("default", "horizon", 5, None, spec=LIBERO_SPEC).identity == "sha256:b9f0228c1c1eacec"
    assert "schedule" not in Protocol("default", "horizon", 5, None, spec=LIBERO_SPEC).as_dict()


@pytest.mark.parametrize("schedule, seeds, cell, expected", [
    ("lerobot", (1000,), "libero_goal-t01-s04", 1004),
    ("lerobot", (1000, 2000), "libero_goal-t01-s04-seed2000", 2004),
    ("openvla", (7, 8), "libero_goal-t01-s04-seed8", 0),
    ("openpi", (7,), "libero_goal-t01-s04", 7),
])
def test_records_of_episodes_that_never_ran_carry_the_schedule_env_seed(schedule, seeds, cell, expected):
    from pytest_libero.results.records import placeholder_record

    protocol = Protocol("default", "horizon", 5, None, spec=LIBERO_SPEC, mode="full", schedule=schedule, seeds=seeds)
    from pytest_libero.benchmarks.libero.adapter import ADAPTER as LIBERO

    record = placeholder_record(cell, "not_run", "never ran", adapter=LIBERO, context=None,
                                protocol=protocol.as_dict(), identity=protocol.identity,
                                policy_profile={}, worker="main")
    assert record["cell"]["seed"] == expected
