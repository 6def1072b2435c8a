"""What kind of run a summary describes, from the model profiles its records carry.

A zero or random policy's run is an infrastructure diagnostic and a demo run a demonstration
replay, never a capability result: summary.json, the terminal and the page say so at the top, so
that a reader of any one of them alone cannot take one for the other.
"""

from __future__ import annotations

from typing import Any, Iterable

# Profile kind -> the words every summary uses.
KIND_LABELS = {"capability": "capability", "diagnostic": "infrastructure diagnostic",
               "demonstration-replay": "demonstration replay"}
EXPLANATIONS = {
    "capability": "a policy's attempt at the tasks",
    "diagnostic": "a built-in diagnostic policy exercised the harness; its success rate measures nothing "
                  "about any model",
    "demonstration-replay": "recorded demonstrations were replayed open loop; its success rate shows the "
                            "harness can score success, not what a model can do",
}


def run_kind(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """{"kind", "label", "text"} from the records' model profiles (placeholders of episodes that never
    ran carry kind "unknown" and do not count)."""
    kinds = sorted({str((r.get("identities", {}).get("model_profile") or {}).get("kind") or "unknown")
                    for r in records} - {"unknown"})
    if not kinds:
        return {"kind": "unknown", "label": "unknown",
                "text": "run kind: unknown (no episode recorded its policy's profile)"}
    if len(kinds) > 1:
        labels = ", ".join(KIND_LABELS.get(k, k) for k in kinds)
        return {"kind": "mixed", "label": f"mixed ({labels})",
                "text": f"run kind: mixed ({labels}): records of different policy kinds; read them apart"}
    kind = kinds[0]
    label = KIND_LABELS.get(kind, kind)
    explanation = EXPLANATIONS.get(kind, "as the policy's profile declares")
    return {"kind": kind, "label": label, "text": f"run kind: {label} ({explanation})"}
