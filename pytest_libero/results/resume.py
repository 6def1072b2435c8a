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

from pathlib import Path
from typing import Any

from pytest_libero.core.outcomes import COMPLETED, ERRORS, Outcome
from pytest_libero.core.protocol import setting_differences
from pytest_libero.errors import OptionError

class ResumeRefused(OptionError):
    """The folder cannot be continued by this run (the plugin reports it as a usage error)."""



def _differences(before: Any, now: Any) -> list[str]:
    return setting_differences(before, now, "in the folder", "now")


def _refuse(run_dir: Path, what: str, differences: list[str]) -> None:
    raise ResumeRefused(
        f"--libero-resume {run_dir}: its {what} differs from this run's, so its results cannot be continued "
        f"({'; '.join(differences[:8])}). Resume with the original settings, or start a new run")


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
        if manifest.get("policy") != policy_spec:
            _refuse(run_dir, "policy", _differences(manifest.get("policy"), policy_spec))
    keep = COMPLETED | ERRORS if keep_errors else COMPLETED
    kept: dict[str, dict[str, Any]] = {}
    for cell, record in records.items():
        ids = record["identities"]
        if ids["protocol"]["identity"] != identity:
            _refuse(run_dir, f"record {cell}'s protocol",
                    _differences(ids["protocol"]["settings"], protocol) or ["protocol identity"])
        spec = (ids.get("model_profile") or {}).get("spec")
        if spec != policy_spec:
            _refuse(run_dir, f"record {cell}'s policy", _differences(spec, policy_spec))
        if Outcome(record["outcome"]["outcome"]) in keep:
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
