"""What an episode record keeps of each chunk a policy returned and of each observation it was
delivered (record schema 3), and the readers that give them back from a record of any schema.

The engine notes one entry per chunk (`chunk_entry`) and per observation; the record stores each
list as one block of columns (`chunk_block`, `observation_block`), so that a record is a handful of
long strings and short number lists instead of hundreds of small objects: JSON reading and schema
checking cost about the same whatever the episode's length, and a record's size is bounded by the
controls executed, not by what the policy returned:

    "chunks": {"policy_call": [1, 2], "executed": [5, 5], "dtype": ["float32", "float32"],
               "shape": [[50, 7], [50, 7]],
               "sha256": "<base64 sha256 of each validated chunk (float64, little-endian, row-major), concatenated>",
               "actions_b64": ["<base64 of the executed rows in the returned dtype, little-endian>", ...],
               "end": null | {"policy_call": 3, "stop": true} | {"policy_call": 3, "invalid": {...}, "executed": 0}}
    "observations": {"policy_call": [1, 2], "executed_controls": [0, 5],
                     "sha256": {"<camera>": "<base64 image sha256 of each observation, concatenated>"},
                     "state": [[...], ...]   (state tracks only)}

The executed rows are exact: the engine executes float64(value) of each returned value, and the
returned dtype holds that value exactly, so decoding and casting to float64 gives the executed
actions bit for bit. Rows returned but not executed are known by the chunk's shape, dtype and
hash only. Base64 rather than JSON numbers: 4 bytes of a float32 take 5.3 characters instead of
about 11. Digests are base64 too (44 characters, `=`-padded, instead of 64 hex ones: a third of a
record's size at K=5 is digests), so a 520-control float64 record stays under 64 KB.

Schema 2 had the same blocks with hex digests; schema 1 kept arrays of entries, chunks with every
returned row as JSON numbers (`returned`). The readers take all three and give digests back as hex,
as the engine computes them.
"""

from __future__ import annotations

import base64
import hashlib
from typing import Any

import numpy as np
from numpy.typing import NDArray

HASH_HEX = 64  # characters of one sha256 digest in a concatenated column: hex (schema 2)
HASH_B64 = 44  # ... and base64 (schema 3)


def digest_b64(hexdigest: str) -> str:
    """A sha256 hex digest (as the engine computes them) as a record stores it: base64, 44 characters."""
    return base64.b64encode(bytes.fromhex(hexdigest)).decode("ascii")


def digests_hex(column: str, count: int) -> list[str]:
    """The `count` hex digests of a record's concatenated digest column, base64 (schema 3) or hex
    (schema 2): the two widths differ, so the column says which it is."""
    if count == 0:
        return []
    width = len(column) // count
    if width * count != len(column) or width not in (HASH_HEX, HASH_B64):
        raise ValueError(f"a digest column of {len(column)} characters does not hold {count} sha256 digests")
    parts = [column[index * width:(index + 1) * width] for index in range(count)]
    return parts if width == HASH_HEX else [base64.b64decode(part, validate=True).hex() for part in parts]


def _little_endian(dtype: np.dtype[Any]) -> np.dtype[Any]:
    return dtype.newbyteorder("<")


def chunk_entry(policy_call: int, chunk: NDArray[Any], returned_dtype: Any, returned_shape: tuple[int, ...],
                executed: int) -> dict[str, Any]:
    """The engine's note of a valid chunk: `chunk` is the validated float64 (n, action size) array;
    `returned_dtype` and `returned_shape` are what the policy returned ((A,) or (n, A)); the
    executed rows are kept in that dtype."""
    dtype = np.dtype(returned_dtype)
    done = np.ascontiguousarray(chunk[:executed].astype(_little_endian(dtype)))
    return {"policy_call": policy_call, "executed": int(executed), "dtype": str(dtype),
            "shape": [int(n) for n in returned_shape],
            "sha256": hashlib.sha256(np.ascontiguousarray(chunk, dtype="<f8").tobytes()).hexdigest(),
            "actions_b64": base64.b64encode(done.tobytes()).decode("ascii")}


def chunk_block(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """The record's `chunks` (schema 3) from the engine's entries: `chunk_entry`s, then at most one
    STOP (`{"policy_call", "stop": True}`) or invalid return (`{"policy_call", "invalid", "executed": 0}`)."""
    valid = [e for e in entries if "actions_b64" in e]
    ends = [e for e in entries if "actions_b64" not in e]
    if len(ends) > 1 or (ends and entries[-1] is not ends[0]):
        raise ValueError(f"a STOP or invalid chunk ends an episode: {len(ends)} such entries, not last")
    return {"policy_call": [e["policy_call"] for e in valid], "executed": [e["executed"] for e in valid],
            "dtype": [e["dtype"] for e in valid], "shape": [e["shape"] for e in valid],
            "sha256": "".join(digest_b64(e["sha256"]) for e in valid), "actions_b64": [e["actions_b64"] for e in valid],
            "end": dict(ends[0]) if ends else None}


def observation_block(observations: list[dict[str, Any]]) -> dict[str, Any]:
    """The record's `observations` (schema 3) from the engine's entries ({"policy_call",
    "executed_controls", "sha256": {camera: hex}, ["state"]}; every entry has the same cameras); the
    digests are stored in base64."""
    cameras = tuple(observations[0]["sha256"]) if observations else ()
    block: dict[str, Any] = {"policy_call": [o["policy_call"] for o in observations],
                             "executed_controls": [o["executed_controls"] for o in observations],
                             "sha256": {camera: "".join(digest_b64(o["sha256"][camera]) for o in observations)
                                        for camera in cameras}}
    if any("state" in o for o in observations):
        block["state"] = [o.get("state") for o in observations]
    return block


def observation_entries(observations: Any) -> list[dict[str, Any]]:
    """One {"policy_call", "executed_controls", "sha256": {camera: hex}} per delivered observation,
    from a record's `observations` of any schema."""
    if isinstance(observations, list):
        return observations
    count = len(observations["policy_call"])
    hashes = {camera: digests_hex(text, count) for camera, text in observations["sha256"].items()}
    entries = []
    for index, (call, controls) in enumerate(zip(observations["policy_call"], observations["executed_controls"],
                                                 strict=True)):
        entry = {"policy_call": call, "executed_controls": controls,
                 "sha256": {camera: digests[index] for camera, digests in hashes.items()}}
        if "state" in observations:
            entry["state"] = observations["state"][index]
        entries.append(entry)
    return entries


def _decode(b64: str, dtype: str, executed: int, policy_call: Any) -> NDArray[Any]:
    rows = np.frombuffer(base64.b64decode(b64, validate=True), dtype=_little_endian(np.dtype(dtype)))
    # The row width is the benchmark's action size: what the values divide into `executed` rows.
    if (executed == 0) != (rows.size == 0) or (executed and rows.size % executed):
        raise ValueError(f"the chunk of policy call {policy_call} holds {rows.size} values, not {executed} "
                         f"executed rows of one action size (executed={executed})")
    return rows.reshape(executed, -1 if executed else 0).astype(np.float64)


def executed_actions(chunks: Any) -> NDArray[Any]:
    """Every executed action of an episode, in order (float64, (controls, action size)): what a replay of the
    recorded run executes. `chunks` is a record's `chunks` of schema 2 or 3 (a block) or schema 1 (an
    array of entries), or the engine's entries (EpisodeResult.chunks)."""
    if isinstance(chunks, dict):
        parts = [_decode(b64, dtype, executed, call) for call, executed, dtype, b64 in zip(
            chunks["policy_call"], chunks["executed"], chunks["dtype"], chunks["actions_b64"], strict=True)]
    else:
        parts = []
        for entry in chunks:
            if "actions_b64" in entry:
                parts.append(_decode(entry["actions_b64"], entry["dtype"], entry["executed"], entry["policy_call"]))
            elif "returned" in entry:  # schema 1: every returned row, as JSON numbers
                rows = np.asarray(entry["returned"], dtype=np.float64)
                parts.append(rows.reshape(-1, rows.shape[-1])[: entry.get("executed") or 0])
    parts = [p for p in parts if p.size] or parts[:1]  # an empty chunk's (0, 0) would not concatenate
    return np.concatenate(parts) if parts else np.zeros((0, 0))
