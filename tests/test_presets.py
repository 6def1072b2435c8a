"""Presets as complete protocols: K and track from the schedule, command-line variants named
everywhere, policy declarations checked before any episode, the run kind at the top of every
summary, and LIBERO-PRO's instruction source in the protocol identity."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from pytest_libero.benchmarks.libero import catalog
from pytest_libero.core.policy import check_declarations
from pytest_libero.benchmarks.libero.spec import SPEC as LIBERO_SPEC
from pytest_libero.core.protocol import Protocol
from pytest_libero.errors import PolicyLoadError

from evidence_helpers import records, run_dirs
from fakes import fake_conftest

FAKES = (Path(__file__).parent / "fakes.py").read_text()
ONE_CELL = ("--libero-scope", "task_coverage", "--libero-suite", "libero_10", "--libero-task-ids", "0")
DECLARING = '''
import numpy as np

class Declaring:
    def __init__(self, **profile):
        self.profile = {"kind": "capability", **profile}
    def reset(self, language): pass
    def act(self, observation): return np.tile([0.0] * 6 + [-1.0], (10, 1))
    def close(self): pass
'''


def header(pytester: pytest.Pytester, *args: str) -> str:
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider", *args)
    assert result.ret == 0, result.outlines
    return next(line for line in result.outlines if line.startswith("libero:"))


def identity(line: str) -> str:
    found = re.search(r"protocol (sha256:[0-9a-f]{16})", line)
    assert found is not None, line
    return found.group(1)


# -- presets and the command line ---------------------------------------------------------------

@pytest.mark.parametrize("name, replan, track", [
    ("standard", 5, "rgb"), ("openvla", 1, "rgb"), ("oft", 8, "openpi-compat"), ("openpi", 5, "openpi-compat"),
    ("lerobot", 10, "openpi-compat"), ("lerobot-docs", 10, "openpi-compat"), ("libero-native", 1, "rgb+proprio"),
])
def test_full_mode_runs_the_preset_k_and_track(pytester, name, replan, track):
    line = header(pytester, "--libero-mode", "full", "--libero-schedule", name)
    assert f"K={replan}, track {track}, full mode: schedule {name}, " in line
    assert "variant" not in line


def test_a_contradicting_replan_interval_runs_a_named_variant_with_its_own_identity(pytester):
    preset = header(pytester, "--libero-mode", "full", "--libero-schedule", "lerobot")
    same = header(pytester, "--libero-mode", "full", "--libero-schedule", "lerobot", "--libero-replan-interval", "10")
    variant = header(pytester, "--libero-mode", "full", "--libero-schedule", "lerobot",
                     "--libero-replan-interval", "5")
    assert identity(same) == identity(preset)  # restating the preset's own K changes nothing
    assert identity(variant) != identity(preset)
    assert "K=5" in variant and "a variant of the preset: replan_interval 5 (preset 10)" in variant
    track = header(pytester, "--libero-mode", "full", "--libero-schedule", "oft", "--libero-track", "rgb")
    assert "track rgb, " in track and "a variant of the preset: track rgb (preset openpi-compat)" in track


def test_fast_mode_identity_is_unchanged():
    # What `pytest --collect-only` prints by default, before and after presets gained K and track.
    assert Protocol("default", "horizon", 5, None, spec=LIBERO_SPEC).identity == "sha256:b9f0228c1c1eacec"
    assert Protocol("development", "horizon", 5, None, spec=LIBERO_SPEC).identity == "sha256:13038a1852c0a03c"


def test_a_variant_is_named_on_every_record_and_in_the_summary(pytester):
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(fake_conftest())
    result = pytester.runpytest("-p", "no:cacheprovider", "--libero-mode", "full", "--libero-schedule", "lerobot",
                                "--libero-replan-interval", "5", "--libero-init-states", "0,1", *ONE_CELL)
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*a variant of the preset: replan_interval 5 (preset 10)*"])
    (run_dir,) = run_dirs(pytester.path / "reports")
    found = records(run_dir)
    assert len(found) == 2
    for record in found.values():
        settings = record["identities"]["protocol"]["settings"]
        assert settings["overrides"] == {"replan_interval": {"preset": 10, "run": 5}}
        assert settings["replan_interval"] == 5 and settings["schedule"]["replan_interval"] == 10
        assert record["counters"]["replan_interval"] == 5
    summary = json.loads((run_dir / "summary.json").read_text())
    assert "a variant of the preset: replan_interval 5 (preset 10)" in summary["schedule"]["text"]
    assert summary["schedule"]["overrides"] == {"replan_interval": {"preset": 10, "run": 5}}
    assert summary["schedule"]["all_init_states_at_schedule_caps"] is False


# -- what a policy declares ---------------------------------------------------------------------

def _protocol(**kwargs):
    base = dict(scope="default", budget="horizon", replan_interval=5, max_policy_calls=None, mode="full",
                schedule="openpi", seeds=(7,), track="openpi-compat")
    return Protocol(spec=LIBERO_SPEC, **{**base, **kwargs})


@pytest.mark.parametrize("profile, protocol, message", [
    ({"replan_interval": 8}, _protocol(),
     "declares replan_interval 8 (what it was built for), but this run uses replan_interval 5 (schedule openpi)"),
    ({"observation_track": "rgb"}, _protocol(),
     "declares observation_track 'rgb' (what it was built for), but this run uses observation_track 'openpi-compat'"),
    ({"max_policy_calls": 200}, _protocol(),
     "declares max_policy_calls 200 (what it was built for), but this run uses max_policy_calls none (the horizon"),
    ({"max_policy_calls": 200}, _protocol(budget="decisions", max_policy_calls=100),
     "declares max_policy_calls 200 (what it was built for), but this run uses max_policy_calls 100"),
    ({"image_convention": "raw-opengl"}, _protocol(), "declares image convention 'raw-opengl'"),
])
def test_a_declaration_that_disagrees_names_both_values(profile, protocol, message):
    with pytest.raises(PolicyLoadError) as caught:
        check_declarations("mine.py:build", profile, protocol)
    assert message in str(caught.value)
    assert "Refusing to start" in str(caught.value)


@pytest.mark.parametrize("profile", [
    None, {}, {"kind": "capability"}, {"replan_interval": 5, "observation_track": "openpi-compat"},
    {"image_convention": "rotated-180"},
])
def test_agreeing_or_absent_declarations_pass(profile):
    check_declarations("mine.py:build", profile, _protocol())
    check_declarations("mine.py:build", {"max_policy_calls": 100},
                       _protocol(budget="decisions", max_policy_calls=100))


@pytest.mark.parametrize("isolation", ["none", "process"])
def test_declaring_k8_under_the_openpi_preset_stops_the_run_before_any_episode(pytester, isolation):
    pytester.makepyfile(fakes=FAKES, declaring=DECLARING)
    pytester.makeconftest(fake_conftest().replace("return FakeService(**{})",
                                                  "raise AssertionError('service started')"))
    result = pytester.runpytest("-p", "no:cacheprovider", "--libero-mode", "full", "--libero-schedule", "openpi",
                                "--libero-init-states", "0,1", *ONE_CELL, "--libero-policy", "declaring.py:Declaring",
                                "--libero-policy-kwargs", '{"replan_interval": 8}',
                                "--libero-policy-isolation", isolation)
    result.assert_outcomes(errors=2)
    result.stdout.fnmatch_lines(["*declares replan_interval 8 (what it was built for), but this run uses "
                                 "replan_interval 5 (schedule openpi)*"])
    assert "service started" not in result.stdout.str()
    (run_dir,) = run_dirs(pytester.path / "reports")
    assert all(r["counters"] is None for r in records(run_dir).values())  # no episode ran


def test_declaring_k5_under_the_openpi_preset_runs(pytester):
    pytester.makepyfile(fakes=FAKES, declaring=DECLARING)
    pytester.makeconftest(fake_conftest())
    result = pytester.runpytest("-p", "no:cacheprovider", "--libero-mode", "full", "--libero-schedule", "openpi",
                                "--libero-init-states", "0", *ONE_CELL, "--libero-policy", "declaring.py:Declaring",
                                "--libero-policy-kwargs",
                                '{"replan_interval": 5, "observation_track": "openpi-compat"}')
    result.assert_outcomes(failed=1)  # ran to the cap: the fake never succeeds
    (run_dir,) = run_dirs(pytester.path / "reports")
    (record,) = records(run_dir).values()
    assert record["counters"]["replan_interval"] == 5 and record["counters"]["executed_controls"] == 520


# -- the run's kind -----------------------------------------------------------------------------

@pytest.mark.parametrize("policy, label", [("zero", "infrastructure diagnostic"),
                                           ("demo", "demonstration replay"),
                                           ("random", "infrastructure diagnostic")])
def test_summary_terminal_and_page_state_the_run_kind_at_the_top(pytester, policy, label):
    pytester.makepyfile(fakes=FAKES)
    pytester.makeconftest(fake_conftest(success_at=3))
    result = pytester.runpytest("-p", "no:cacheprovider", "--libero-scope", "development", "--libero-task-ids", "0",
                                "--libero-policy", policy, "--libero-video", "none")
    lines = result.outlines
    top = lines.index(next(line for line in lines if "LIBERO episodes" in line))
    assert lines[top + 1].startswith(f"LIBERO run kind: {label} (")
    (run_dir,) = run_dirs(pytester.path / "reports")
    summary = json.loads((run_dir / "summary.json").read_text())
    assert list(summary)[:2] == ["schema_version", "run_kind"]
    assert summary["run_kind"]["label"] == label and summary["run_kind"]["text"].startswith(f"run kind: {label}")
    page = (run_dir / "report.html").read_text()
    assert page.index(f"run kind: {label}") < page.index("<table")


def test_run_kind_of_capability_mixed_and_unknown_records():
    from pytest_libero.results.run_kind import run_kind

    def record(kind):
        return {"identities": {"model_profile": {"kind": kind}}}

    assert run_kind([record("capability")])["label"] == "capability"
    assert run_kind([record("capability"), record("unknown")])["label"] == "capability"
    assert run_kind([record("diagnostic"), record("capability")])["kind"] == "mixed"
    assert run_kind([record("unknown")])["kind"] == "unknown" and run_kind([])["kind"] == "unknown"


# -- LIBERO-PRO's instruction source ------------------------------------------------------------

def pro_header(pytester, suite, *args):
    return header(pytester, "--libero-scope", "task_coverage", "--libero-suite", suite, "--libero-task-ids", "0",
                  *args)


def test_instruction_source_is_in_libero_pro_identities_only(pytester):
    standard = pro_header(pytester, "libero_spatial")
    assert "instruction" not in standard
    # Standard-suite and fast-mode identities are what they were before the field existed.
    assert identity(standard) == Protocol("task_coverage", "horizon", 5, None, spec=LIBERO_SPEC).identity
    bddl = pro_header(pytester, "libero_spatial_object")
    explicit = pro_header(pytester, "libero_spatial_object", "--libero-pro-instruction", "bddl")
    task_map = pro_header(pytester, "libero_spatial_object", "--libero-pro-instruction", "task-map")
    assert "instruction_source bddl" in bddl and "instruction_source task-map" in task_map
    assert identity(bddl) == identity(explicit)
    assert len({identity(standard), identity(bddl), identity(task_map)}) == 3


def test_task_map_warns_that_lan_and_task_perturbations_never_reach_the_policy(pytester):
    result = pytester.runpytest("--collect-only", "-q", "-p", "no:cacheprovider", "--libero-scope", "task_coverage",
                                "--libero-suite", "libero_goal_lan", "--libero-pro-instruction", "task-map")
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*LiberoProInstructionWarning*libero_goal_lan deliver the unperturbed task-map "
                                 "instruction*never reaches the policy*"])


def test_instruction_source_without_a_libero_pro_suite_is_refused(pytester):
    result = pytester.runpytest("--collect-only", "-p", "no:cacheprovider", "--libero-pro-instruction", "task-map")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--libero-pro-instruction task-map applies only to LIBERO-PRO suites*"])


@pytest.mark.parametrize("suite", ["libero_spatial_object", "libero_goal_swap", "libero_10_lan", "libero_object_task"])
def test_the_service_chooses_the_instruction_by_source(suite):
    from pytest_libero.benchmarks.libero.service import delivered_instruction

    entry = catalog.entry(suite, 0)
    env = SimpleNamespace(language_instruction="the text parsed from the perturbed bddl")
    base = catalog.entry(catalog.base_suite(suite), 0)
    assert delivered_instruction(entry, "bddl", env) == "the text parsed from the perturbed bddl"
    assert delivered_instruction(entry, None, env) == "the text parsed from the perturbed bddl"
    assert delivered_instruction(entry, "task-map", env) == base["language"]
    standard = catalog.entry("libero_spatial", 0)
    assert delivered_instruction(standard, "bddl", env) == standard["language"]  # standard suites: the task map's


@pytest.mark.real_libero
def test_a_libero_pro_object_cell_delivers_the_bddl_language_by_default_and_the_task_map_text_otherwise(pytester):
    from pytest_libero.benchmarks.libero.inventory import InstalledLibero, bddl_language

    suite = "libero_spatial_object"
    entry = catalog.entry(suite, 0)
    installed_text = " ".join(bddl_language(InstalledLibero.locate().bddl_root / entry["bddl_file"]).split())
    task_map_text = catalog.entry("libero_spatial", 0)["language"]
    assert installed_text != task_map_text  # "pick the akita black bowl ..." against "pick up the black bowl ..."
    delivered, identities = {}, {}
    for source in ("bddl", "task-map"):
        output = pytester.path / source
        result = pytester.runpytest_subprocess(
            "-p", "no:cacheprovider", "--libero-scope", "task_coverage", "--libero-suite", suite,
            "--libero-task-ids", "0", "--libero-pro-instruction", source, "--libero-budget", "decisions",
            "--libero-max-policy-calls", "1", "--libero-video", "none", "--libero-output", str(output))
        result.assert_outcomes(failed=1)
        (run_dir,) = run_dirs(output)
        (record,) = records(run_dir).values()
        delivered[source] = record["cell"]["language"]
        identities[source] = record["identities"]["protocol"]["identity"]
        assert record["identities"]["protocol"]["settings"]["benchmark_options"] == {"instruction_source": source}
    # LIBERO's BDDL parser lowercases the words; LIBERO-PRO's runner sends that parse as it is.
    assert delivered["bddl"] == installed_text.lower()
    assert delivered["task-map"] == task_map_text
    assert identities["bddl"] != identities["task-map"]
