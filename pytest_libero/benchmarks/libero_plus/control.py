"""A control arm for LIBERO-plus: the same policy's finished LIBERO run on the base tasks.

A category's rate alone does not say what the perturbation cost; the control's rate on the same
base tasks does. `--libero-plus-control RUN` names the run; it is checked before anything runs
(`check`) and recorded in run.json (RUN_KEY), so a summary, and `python -m pytest_libero report`,
rebuild the comparison from the two folders' records (`drops`).

Per group of variants (a category, a difficulty, a table cell...), over its completed variants
(passed or failed; errored and unattempted ones count nowhere, as in the rates):

- the control's rate is matched to the group's mix of base tasks: each variant adds its base
  task's control rate with weight 1/n, so a base task under 30 of the group's variants counts 30
  times as much as one under a single variant;
- the drop is control minus variants, in percentage points (positive: the perturbation cost);
- its 95% interval is Newcombe's hybrid score interval for two independent proportions (method 10),
  from the variants' Wilson interval and the control's Wilson interval at Kish's effective number
  of episodes (the weights make the matched rate less precise than its episode count says);
- a group with a base task the control has no completed episode of gets no number: the missing
  base tasks are named instead.

LIBERO-plus selections hold variants only (one benchmark adapter per run), so the control is
always another run's folder, never base-task cells of the same session.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping

from pytest_libero.benchmarks.libero_plus import catalog as lp
from pytest_libero.core.contract import MAX_CHUNK_ROWS
from pytest_libero.core.outcomes import status
from pytest_libero.core.policy import PolicySpec, parse_policy_kwargs
from pytest_libero.core.protocol import DEFAULT_MAX_POLICY_CALLS, DEFAULT_REPLAN_INTERVAL, setting_differences
from pytest_libero.core.spec import BenchmarkSpec
from pytest_libero.core.statistics import (holm_adjust, kish_effective_n, newcombe_difference_ci,
                                           newcombe_difference_p, wilson, wilson_limits)
from pytest_libero.errors import OptionError

RUN_KEY = "libero_plus_control"  # run.json's record of the control
CONTROL_BENCHMARK = "libero"
# The settings that change what the policy sees or may do in an episode. A control that differs in
# one of them would mix that change's effect into the drop, so it is refused. Mode, schedule, seeds,
# init states, settling, caps of a full-mode schedule and scope may differ: a fast or a full run of
# the base tasks are both controls (the block names the control's mode).
MATCHED = ("replan_interval", "track", "budget", "max_policy_calls", "max_chunk_rows", "cameras", "image_shape",
           "camera_transform")
METHOD = ("drop = control rate - variants' rate (percentage points); the control's rate is matched to the "
          "group's base tasks, each variant weighting its base task once; 95% CI: Newcombe's hybrid score "
          "interval for two independent proportions (method 10) from the variants' Wilson interval and the "
          "control's Wilson interval at Kish's effective number of episodes; errored and unattempted episodes "
          "excluded on both sides; p_value: two-sided, of no drop, dual to that interval (the smallest alpha at "
          "which the interval at level 1 - alpha excludes 0)")
# Many rows, many chances (issue 35): the rows of one level form a family for Holm's adjustment.
MULTIPLICITY = ("holm_p is Holm's step-down adjusted p_value within each level (all categories; all difficulties; "
                "all suites; all table cells), rows without a drop left out of the family; the overall row is the "
                "primary test, unadjusted")


def matched_settings(settings: Mapping[str, Any]) -> dict[str, Any]:
    """The MATCHED settings of stored protocol settings (run.json's), defaults filled in as the
    protocol leaves them out."""
    found = {key: settings.get(key) for key in MATCHED}
    if found["max_chunk_rows"] is None:
        found["max_chunk_rows"] = MAX_CHUNK_ROWS  # the default is left out of the settings
    return json.loads(json.dumps(found))  # tuples as run.json holds them


def _this_run(settings: Mapping[str, Any], spec: BenchmarkSpec) -> dict[str, Any]:
    """This run's MATCHED settings from its options, as the plugin will decide them (a LIBERO-plus run
    has no full-mode preset to take K from)."""
    budget = settings.get("libero_budget") or "horizon"
    calls = settings.get("libero_max_policy_calls")
    replan = settings.get("libero_replan_interval")
    return matched_settings({
        "replan_interval": DEFAULT_REPLAN_INTERVAL if replan is None else replan,
        "track": settings.get("libero_track") or "rgb", "budget": budget,
        "max_policy_calls": (DEFAULT_MAX_POLICY_CALLS if calls is None else calls) if budget == "decisions" else None,
        "max_chunk_rows": settings.get("libero_max_chunk_rows"),
        "cameras": spec.cameras, "image_shape": spec.image_shape, "camera_transform": spec.camera_transform})


def _manifest(folder: Path) -> dict[str, Any]:
    from pytest_libero.results.summary import load_manifest

    return load_manifest(folder) if folder.is_dir() else {}


def check(path: str, settings: Mapping[str, Any], spec: BenchmarkSpec) -> dict[str, Any]:
    """run.json's record of the control run at `path`; OptionError naming the value and the fix when
    it is not a finished LIBERO run of this run's policy under the same MATCHED settings."""
    where = f"--libero-plus-control {path}"
    folder = Path(path).expanduser().resolve()
    manifest = _manifest(folder)
    protocol, policy = manifest.get("protocol"), manifest.get("policy")
    if not isinstance(protocol, dict) or not isinstance(protocol.get("settings"), dict) or policy is None:
        raise OptionError(f"{where}: not a pytest-libero run folder (no readable run.json with a protocol and a "
                          "policy); pass the folder of a finished LIBERO run of this policy on the base tasks, "
                          "reports/<profile>/<run-id>")
    benchmark = protocol["settings"].get("benchmark") or CONTROL_BENCHMARK
    if benchmark != CONTROL_BENCHMARK:
        raise OptionError(f"{where}: a {benchmark} run; the control is a run of --libero-benchmark libero on the "
                          "unperturbed base tasks (`pytest --libero-scope task_coverage --libero-suite SUITE`, "
                          "fast or full mode, with this run's policy)")
    if not (folder / "episodes").is_dir() or not any((folder / "episodes").iterdir()):
        raise OptionError(f"{where}: the run has no episode records yet; run the control first (or pass another)")
    mine = PolicySpec(settings.get("libero_policy") or "zero",
                      parse_policy_kwargs(settings.get("libero_policy_kwargs"))).as_dict()
    if policy != mine:
        raise OptionError(f"{where}: its policy is {_policy_text(policy)}, this run's {_policy_text(mine)}; a "
                          "control arm is the same policy on the base tasks: pass a run of "
                          f"{_policy_text(mine)} (or give the policy and --libero-policy-kwargs the control ran with)")
    differences = setting_differences(matched_settings(protocol["settings"]), _this_run(settings, spec),
                                      "in the control", "in this run")
    if differences:
        raise OptionError(f"{where}: {'; '.join(differences)}. These settings change what the policy sees or may "
                          "do, so the drop would mix their effect with the perturbation's; give this run the "
                          "control's (its run.json's command_line), or run a control with this run's")
    return {"run": str(folder), "run_id": manifest.get("run_id"), "policy": policy,
            "protocol_identity": protocol.get("identity"), "mode": protocol["settings"].get("mode", "fast")}


def _policy_text(policy: Any) -> str:
    if not isinstance(policy, dict):
        return repr(policy)
    kwargs = policy.get("kwargs") or {}
    return repr(policy.get("name")) + (f" with kwargs {json.dumps(kwargs, sort_keys=True)}" if kwargs else "")


# -- the drops ---------------------------------------------------------------------------------

Tally = dict[tuple[str, int], list[int]]  # base task -> [successes, completed episodes]


def control_tally(records: Mapping[str, dict[str, Any]]) -> Tally:
    """The control's completed episodes and successes per base task (suite, LIBERO task index)."""
    tally: Tally = {}
    for record in records.values():
        state = status(record["outcome"]["outcome"])
        if state in ("passed", "failed") and record["cell"]["suite"] in lp.SUITES:
            counts = tally.setdefault((record["cell"]["suite"], int(record["cell"]["task_index"])), [0, 0])
            counts[0] += state == "passed"
            counts[1] += 1
    return tally


def drop(members: list[str], outcomes: Mapping[str, str], tally: Tally) -> dict[str, Any]:
    """One group's row: the variants' rate, the matched control rate, the drop and its interval (or
    the base tasks the control lacks). `outcomes`: each variant's pytest status."""
    bases = lp.base_tasks()
    completed = [c for c in members if outcomes.get(c) in ("passed", "failed")]
    passed = sum(outcomes[c] == "passed" for c in completed)
    row: dict[str, Any] = {"variants": wilson(passed, len(completed)), "control": None, "drop_pp": None,
                           "drop_ci95_pp": None, "p_value": None, "missing_base_tasks": []}
    if not completed:
        row["note"] = "no completed variant"
        return row
    per_base: dict[tuple[str, int], int] = {}
    for cell in completed:
        suite, index = lp.parse_variant_id(cell)  # type: ignore[misc]  # members are variant ids
        key = (suite, bases[suite][index])
        per_base[key] = per_base.get(key, 0) + 1
    missing = sorted(key for key in per_base if key not in tally)
    if missing:
        row["missing_base_tasks"] = [lp.base_task_label(*key) for key in missing]
        row["note"] = (f"the control has no completed episode of {len(missing)} of these variants' "
                       f"{len(per_base)} base task(s)")
        return row
    n = len(completed)
    rate_control = sum(count / n * tally[key][0] / tally[key][1] for key, count in per_base.items())
    # Every control episode of base task t carries t's share of the variants, split over t's episodes.
    weights = [count / n / tally[key][1] for key, count in per_base.items() for _ in range(tally[key][1])]
    effective = kish_effective_n(weights)
    rate_variants = passed / n
    low, high = newcombe_difference_ci(rate_control, effective, rate_variants, n)
    row.update(control={"rate": rate_control, "ci95": list(wilson_limits(rate_control, effective)),
                        "episodes": sum(tally[key][1] for key in per_base), "effective_n": effective,
                        "base_tasks": len(per_base)},
               drop_pp=100 * (rate_control - rate_variants), drop_ci95_pp=[100 * low, 100 * high],
               p_value=newcombe_difference_p(rate_control, effective, rate_variants, n))
    return row


def drops(groups: Mapping[str, Any], outcomes: Mapping[str, str], recorded: Mapping[str, Any],
          this_settings: Mapping[str, Any]) -> dict[str, Any]:
    """The block's "control": run.json's record of the control and, per group of `groups` (name -> cell ids,
    or "table" -> [(key fields, cell ids)]), its drop row; an "error" instead when the control folder
    cannot be read or no longer matches."""
    from pytest_libero.results.summary import read_records

    block: dict[str, Any] = {**recorded, "method": METHOD, "multiplicity": MULTIPLICITY}
    folder = Path(str(recorded.get("run")))
    manifest = _manifest(folder)
    if not manifest:
        block["error"] = f"the control run folder {folder} has no readable run.json (moved or deleted?)"
        return block
    settings = (manifest.get("protocol") or {}).get("settings") or {}
    differences = setting_differences(matched_settings(settings), matched_settings(this_settings),
                                      "in the control", "in this run")
    if differences or manifest.get("policy") != recorded.get("policy"):
        block["error"] = (f"the control run folder {folder} no longer holds the checked control "
                          f"({'; '.join(differences) or 'another policy'})")
        return block
    tally = control_tally(read_records(folder)[0])
    block["control_base_tasks"] = len(tally)
    for name, members in groups.items():
        if name == "table":
            rows = with_holm({str(i): dict(key, **drop(cells, outcomes, tally))
                              for i, (key, cells) in enumerate(members)})
            block["table"] = list(rows.values())
        elif name == "overall":
            block["overall"] = drop(members, outcomes, tally)
        else:
            block[name] = with_holm({value: drop(cells, outcomes, tally) for value, cells in members.items()})
    return block


def with_holm(rows: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One level's rows, each with a drop given `holm_p`, Holm's adjusted p over the level's rows
    that have one (a row not covered has no test, so it is no member of the family)."""
    adjusted = holm_adjust({name: row["p_value"] for name, row in rows.items() if row["p_value"] is not None})
    return {name: dict(row, holm_p=adjusted.get(name)) for name, row in rows.items()}
