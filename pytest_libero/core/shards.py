"""Shards: one deterministic stride of the selected cells per cluster task (merged by pytest_libero.results.merge).

Shard K of N (K is 1-based, `--libero-shard K/N`) runs the cells at 0-based positions
K-1, K-1+N, K-1+2N, ... of the selection in native order (suite order, then task index), so
every shard gets a similar mix of suites and the union of all N shards is the whole selection.
The shard also comes from a Slurm array (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN,
SLURM_ARRAY_TASK_COUNT) or a Kubernetes Indexed Job (JOB_COMPLETION_INDEX, with the count from
--libero-shard-count or LIBERO_SHARD_COUNT). Pure stdlib: it runs during collection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence, TypeVar

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Shard:
    """Shard `index` (1-based) of `count`, and where that came from."""

    index: int
    count: int
    source: str

    def select(self, items: Sequence[T]) -> tuple[T, ...]:
        return tuple(items[self.index - 1::self.count])

    def as_dict(self) -> dict[str, object]:
        return {"index": self.index, "count": self.count, "source": self.source}


def int_ranges(values: Sequence[int]) -> str:
    """Sorted distinct integers as ranges: 0,1,2,5 -> '0-2,5' (schedule tables, Slurm's --array)."""
    ordered = sorted(set(values))
    parts: list[list[int]] = []
    for value in ordered:
        if parts and value == parts[-1][1] + 1:
            parts[-1][1] = value
        else:
            parts.append([value, value])
    return ",".join(f"{low}-{high}" if high > low else f"{low}" for low, high in parts)


def _int(text: str, what: str) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise ValueError(f"{what} {text!r} is not an integer") from None


def _checked(index: int, count: int, source: str) -> Shard:
    if count < 1:
        raise ValueError(f"{source}: the shard count must be at least 1, not {count}")
    if not 1 <= index <= count:
        raise ValueError(f"{source}: shard {index} does not exist in 1..{count} (shards are numbered from 1)")
    return Shard(index, count, source)


def resolve_shard(option: str | None, count_option: int | None, environ: Mapping[str, str]) -> Shard | None:
    """The shard of this run, or None for the whole selection. ValueError names the bad setting.

    Precedence: --libero-shard, then a Slurm array, then a Kubernetes Indexed Job.
    """
    if option is not None:
        index_text, slash, of_text = option.partition("/")
        if not slash:
            raise ValueError(f"--libero-shard {option!r}: give K/N, e.g. 2/3 for the second of three shards")
        return _checked(_int(index_text, "--libero-shard index"), _int(of_text, "--libero-shard count"),
                        f"--libero-shard {option}")
    count_text = str(count_option) if count_option is not None else environ.get("LIBERO_SHARD_COUNT")
    if "SLURM_ARRAY_TASK_ID" in environ and "SLURM_ARRAY_TASK_COUNT" in environ:
        # Array ids start wherever --array starts (0-31, 1-32, ...): count from the lowest.
        task = _int(environ["SLURM_ARRAY_TASK_ID"], "SLURM_ARRAY_TASK_ID")
        low = _int(environ.get("SLURM_ARRAY_TASK_MIN", "0"), "SLURM_ARRAY_TASK_MIN")
        count = _int(count_text, "--libero-shard-count/LIBERO_SHARD_COUNT") if count_text is not None \
            else _int(environ["SLURM_ARRAY_TASK_COUNT"], "SLURM_ARRAY_TASK_COUNT")
        return _checked(task - low + 1, count, f"Slurm array task {task} (min {low})")
    if "JOB_COMPLETION_INDEX" in environ:
        if count_text is None:
            raise ValueError("JOB_COMPLETION_INDEX is set (a Kubernetes Indexed Job) but the shard count is "
                             "unknown: pass --libero-shard-count N or set LIBERO_SHARD_COUNT to the Job's "
                             "completions")
        index = _int(environ["JOB_COMPLETION_INDEX"], "JOB_COMPLETION_INDEX")
        return _checked(index + 1, _int(count_text, "--libero-shard-count/LIBERO_SHARD_COUNT"),
                        f"Kubernetes JOB_COMPLETION_INDEX {index}")
    if count_option is not None:
        raise ValueError("--libero-shard-count applies to a Kubernetes Indexed Job (JOB_COMPLETION_INDEX) "
                         "or a Slurm array; use --libero-shard K/N otherwise")
    return None
