"""`--libero-resume RUN_DIR`: continue a run in its own folder without running anything twice.

A cell is skipped when its record is complete: schema-valid (torn files and temporaries are
ignored and the cell is redone), of the same protocol identity and policy spec, and with a
terminal outcome (success, failure, policy_error; with --libero-resume-keep-errors also
env_error and crashed). Skipped cells are still items: they report what their record says
without building the policy or starting the simulator, so every count stays
selected = passed + failed + errored + unattempted. A folder of another protocol or policy is
refused (ResumeRefused), naming the settings that differ: results of different identities never mix.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

from pytest_libero.core.outcomes import COMPLETED, ERRORS, Outcome
from pytest_libero.core.protocol import setting_differences
from pytest_libero.errors import OptionError

class ResumeRefused(OptionError):
    """The folder cannot be continued by this run (the plugin reports it as a usage error)."""



# The command-line option that sets each protocol field (fields of no option are fixed by the harness).
OPTION_OF = {
    "scope": "--libero-scope", "budget": "--libero-budget", "replan_interval": "--libero-replan-interval",
    "max_policy_calls": "--libero-max-policy-calls", "mode": "--libero-mode", "track": "--libero-track",
    "schedule": "--libero-schedule", "seeds": "--libero-seeds (full mode)",
    "init_states": "--libero-init-states (full mode)", "init_index": "--libero-mode/--libero-init-states",
    "seed": "--libero-mode/--libero-seeds", "overrides": "--libero-replan-interval/--libero-track (full mode)",
    "max_chunk_rows": "--libero-max-chunk-rows",
    "benchmark": "--libero-benchmark", "benchmark_options": "the benchmark's options",
    "name": "--libero-policy", "kwargs": "--libero-policy-kwargs",
}


def as_stored(value: Any) -> Any:
    """`value` as run.json and the records store it (tuples become lists): what resume compares."""
    return json.loads(json.dumps(value))


def _differences(before: Any, now: Any) -> list[str]:
    """The settings that differ, as stored, each with the option that sets it."""
    found = setting_differences(as_stored(before), as_stored(now), "in the folder", "now")
    named = []
    for line in found:
        field = line.split(":", 1)[0]
        option = OPTION_OF.get(field.split(".", 1)[0])
        named.append(f"{option} ({line})" if option else line)
    return named


def _refuse(run_dir: Path, what: str, differences: list[str]) -> None:
    raise ResumeRefused(
        f"--libero-resume {run_dir}: its {what} differs from this run's, so its results cannot be continued "
        f"({'; '.join(differences[:8])}). Resume with the original settings (`pytest --libero-resume {run_dir}` "
        "alone reuses them), or start a new run")


def completed_cells(run_dir: Path, protocol: dict[str, Any], identity: str, policy_spec: dict[str, Any],
                    keep_errors: bool = False) -> dict[str, dict[str, Any]]:
    """Records of RUN_DIR that this run keeps, by cell id; ResumeRefused when identities differ."""
    from pytest_libero.results.summary import load_run

    if not run_dir.is_dir():
        raise ResumeRefused(f"--libero-resume {run_dir}: no such folder; pass reports/<profile>/<run-id> "
                                "of the run to continue")
    manifest, _, records, _ = load_run(run_dir)
    if not manifest and not records and not (run_dir / "selection.json").exists():
        if any(run_dir.iterdir()):
            raise ResumeRefused(f"--libero-resume {run_dir}: not a pytest-libero run folder (no run.json, "
                                    "selection.json or episodes/)")
        return {}
    if manifest:
        settings = (manifest.get("protocol") or {}).get("settings")
        if (manifest.get("protocol") or {}).get("identity") != identity:
            _refuse(run_dir, "protocol", _differences(settings, protocol) or ["protocol identity"])
        if manifest.get("policy") != as_stored(policy_spec):
            _refuse(run_dir, "policy", _differences(manifest.get("policy"), policy_spec))
    keep = {outcome.value for outcome in (COMPLETED | ERRORS if keep_errors else COMPLETED)}
    stored_spec = as_stored(policy_spec)  # once, not once a record
    kept: dict[str, dict[str, Any]] = {}
    for cell, record in records.items():
        ids = record["identities"]
        if ids["protocol"]["identity"] != identity:
            _refuse(run_dir, f"record {cell}'s protocol",
                    _differences(ids["protocol"]["settings"], protocol) or ["protocol identity"])
        spec = (ids.get("model_profile") or {}).get("spec")
        if spec != stored_spec:
            _refuse(run_dir, f"record {cell}'s policy", _differences(spec, policy_spec))
        if Outcome(record["outcome"]["outcome"]).value in keep:
            kept[cell] = record
    return kept


def previous_sessions(run_dir: Path) -> list[dict[str, Any]]:
    """What run.json says of the sessions so far (kept in the new run.json)."""
    from pytest_libero.results.summary import load_manifest

    manifest = load_manifest(run_dir)
    if not manifest:
        return []
    earlier = list(manifest.get("previous_sessions") or [])
    return earlier + [{k: manifest.get(k) for k in ("started", "command_line", "machine")}]


def recorded_options(run_dir: Path, flags: frozenset[str]) -> list[str]:
    """The --libero-* options of the command line run.json recorded (less --libero-resume and its
    value), for `pytest --libero-resume RUN` given no other LIBERO option. `flags` are the options
    that take no value. Empty when the folder has no run.json.

    A session that was itself `pytest --libero-resume RUN` alone recorded no option: the latest
    earlier session's command line (`previous_sessions`) that has some is the one it ran with.
    """
    from pytest_libero.results.summary import load_manifest

    manifest = load_manifest(run_dir) or {}
    sessions = [manifest, *reversed(list(manifest.get("previous_sessions") or []))]
    for session in sessions:
        kept = _libero_options(list(session.get("command_line") or [])[1:], flags)
        if kept:
            return kept
    return []


def _libero_options(argv: list[str], flags: frozenset[str]) -> list[str]:
    kept: list[str] = []
    i = 0
    while i < len(argv):
        token = str(argv[i])
        i += 1
        name = token.split("=", 1)[0]
        if not name.startswith("--libero-"):
            continue
        takes_value = name not in flags and "=" not in token
        value = [str(argv[i])] if takes_value and i < len(argv) else []
        i += len(value)
        if name not in ("--libero-resume", "--libero-resume-keep-errors"):
            kept.extend([token, *value])
    return kept


def describe(options: list[str]) -> str:
    return shlex.join(options)
