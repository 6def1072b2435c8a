"""The user's RoboMemArena checkout: where its parts are, its 26 tasks, and its provenance.

Controller side, stdlib only: nothing of the checkout is imported here (its LIBERO fork clashes
with the installed `libero` package; only the bench service imports it). What is read: file
names, the BDDL files' and scorer files' bytes (for hashes), the memory-task JSON (memory types)
and `git rev-parse HEAD` when the checkout is a git repository.

The evaluator changed between commits (metric definitions, stage scorers), so every record
carries the checkout's commit ("unknown" when it is not a git checkout) and the sha256 of each
scorer file and BDDL file that scored it; the scorer and BDDL hashes are part of the protocol
identity, so a run over a changed scorer never resumes into, merges with or compares against an
earlier one (shared/research/robomemarena.md).
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pytest_libero.core.hashing import sha256_bytes, sha256_file

CHECKOUT_ENV = "PYTEST_LIBERO_ROBOMEMARENA"
TASK_IDS = tuple(range(1, 27))
SCRIPTS = Path("evaluation_benchmark/scripts")
FORK = Path("evaluation_benchmark/libero_fork")
BDDL = Path("evaluation_benchmark/bddl")
# The memory-task table (memory type, task name per task id); two byte-identical copies exist.
TASK_TABLES = (Path("evaluation_benchmark/async_vlm26_reference/fullvlm_v2_26_memory_tasks.json"),
               Path("evaluation_benchmark/reference_evaluation/tasks2_26_vlm5_reference/fullvlm_v2_26_memory_tasks.json"))
# The files that score an episode (b175708 and later): the goal check and task 1's stage checks
# (eval_common, eval_task1_only), tasks 2-26's stage specs and goal overrides
# (task2_26_reference_stage) and the adapter's observation (policy_adapter).
SCORER_FILES = ("eval_common.py", "eval_task1_only.py", "task2_26_reference_stage.py", "policy_adapter.py")
# The task table's memory types (written "C + O" there; kept without spaces) and their words.
MEMORY_WORDS = {"S": "sequence", "O": "occlusion", "C": "counting", "T": "transferring"}
_BDDL_NAME = re.compile(r"(?P<id>\d+)_(?P<stem>[a-z0-9_]+)\.bddl")


def memory_words(memory_type: str) -> tuple[str, ...]:
    """A memory type in words, e.g. ("counting", "occlusion") for C+O; unknown letters are left out."""
    return tuple(MEMORY_WORDS[part] for part in memory_type.split("+") if part in MEMORY_WORDS)


class CheckoutError(ValueError):
    """The path is not a usable RoboMemArena checkout; the message says what was expected where."""


@dataclass(frozen=True, slots=True)
class Task:
    """One of the 26 tasks as the checkout defines it."""

    task_id: int
    bddl: str  # relative to the checkout root
    bddl_sha256: str
    stem: str  # the BDDL file's stem without its number, e.g. "cookies_tomato_basket"
    memory_type: str
    name: str  # the task table's task_name

    @property
    def prompt(self) -> str:
        """The prompt RoboMemArena's adapter path sends (eval_common.get_prompt: the BDDL stem
        without its number, underscores as spaces). The service reports the checkout's own."""
        return self.stem.replace("_", " ")


@dataclass(frozen=True, slots=True)
class Checkout:
    root: str
    commit: str  # git HEAD, or "unknown"
    dirty: bool | None  # uncommitted changes to the scorer or BDDL folders (None: not a git checkout)
    scorer_sha256: tuple[tuple[str, str], ...]  # (file name, sha256) in SCORER_FILES order
    tasks: tuple[Task, ...]

    def task(self, task_id: int) -> Task:
        return self.tasks[task_id - 1]

    def bddl_digest(self) -> str:
        """One sha256 over every task's BDDL hash (the task definitions, in the protocol identity)."""
        return sha256_bytes("".join(f"{t.task_id}:{t.bddl_sha256}\n" for t in self.tasks).encode())

    def scorer_digest(self) -> str:
        """One sha256 over the scorer files' hashes."""
        return sha256_bytes("".join(f"{name}:{digest}\n" for name, digest in self.scorer_sha256).encode())

    def provenance(self) -> dict[str, object]:
        return {"commit": self.commit, "dirty": self.dirty, "scorer_sha256": dict(self.scorer_sha256),
                "scorer_digest": self.scorer_digest()}


def resolve_root(given: str | None, environ: dict[str, str]) -> Path:
    """The checkout's root from the option or the environment; CheckoutError when neither is set."""
    text = given or environ.get(CHECKOUT_ENV)
    if not text:
        raise CheckoutError(
            "--libero-benchmark robomemarena needs your RoboMemArena checkout: pass "
            f"--libero-robomemarena-checkout PATH or set {CHECKOUT_ENV}=PATH (the repository root, the folder "
            "holding evaluation_benchmark/). RoboMemArena has no licence, so none of it ships with this suite")
    return Path(text).expanduser().resolve()


def load(root: Path) -> Checkout:
    """Read and check a checkout; CheckoutError naming each missing part and where it was looked for."""
    if not root.is_dir():
        raise CheckoutError(f"RoboMemArena checkout {root}: no such folder")
    missing = [str(SCRIPTS / name) for name in SCORER_FILES if not (root / SCRIPTS / name).is_file()]
    if not (root / FORK / "libero" / "libero" / "envs").exists():
        missing.append(str(FORK / "libero" / "libero" / "envs"))
    table = next((root / t for t in TASK_TABLES if (root / t).is_file()), None)
    if table is None:
        missing.append(str(TASK_TABLES[0]))
    if missing:
        raise CheckoutError(f"RoboMemArena checkout {root}: missing {', '.join(missing)}. Pass the repository root "
                            "(the folder holding evaluation_benchmark/) of a checkout at commit b175708 or later")
    assert table is not None
    return Checkout(root=str(root), commit=_git_head(root), dirty=_git_dirty(root),
                    scorer_sha256=tuple((name, sha256_file(root / SCRIPTS / name)) for name in SCORER_FILES),
                    tasks=_tasks(root, table))


def _tasks(root: Path, table: Path) -> tuple[Task, ...]:
    bddl_dir = root / BDDL
    found: dict[int, Path] = {}
    for path in sorted(bddl_dir.glob("*.bddl")) if bddl_dir.is_dir() else ():
        match = _BDDL_NAME.fullmatch(path.name)
        if match is not None and int(match.group("id")) in TASK_IDS:
            found.setdefault(int(match.group("id")), path)
    absent = [t for t in TASK_IDS if t not in found]
    if absent:
        raise CheckoutError(f"RoboMemArena checkout {root}: no BDDL file for task(s) {', '.join(map(str, absent))} "
                            f"in {BDDL} (expected <id>_<name>.bddl for ids 1-26)")
    try:
        rows = {int(row["task_id"]): row for row in json.loads(table.read_text(encoding="utf-8"))["tasks"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CheckoutError(f"RoboMemArena task table {table}: unreadable ({type(exc).__name__}: {exc})") from None
    tasks = []
    for task_id, path in sorted(found.items()):
        row = rows.get(task_id) or {}
        memory = str(row.get("memory_type") or "").replace(" ", "")
        if not memory or any(part not in MEMORY_WORDS for part in memory.split("+")):
            raise CheckoutError(f"RoboMemArena task table {table}: task {task_id} has memory_type "
                                f"{row.get('memory_type')!r}; expected letters of {', '.join(MEMORY_WORDS)} "
                                "joined by +")
        tasks.append(Task(task_id=task_id, bddl=str(path.relative_to(root)), bddl_sha256=sha256_file(path),
                          stem=_BDDL_NAME.fullmatch(path.name).group("stem"),  # type: ignore[union-attr]
                          memory_type=memory, name=str(row.get("task_name") or path.stem)))
    return tuple(tasks)


def _git(root: Path, *args: str) -> str | None:
    if not (root / ".git").exists():
        return None
    try:
        done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout if done.returncode == 0 else None


def _git_head(root: Path) -> str:
    head = _git(root, "rev-parse", "HEAD")
    return head.strip() if head else "unknown"


def _git_dirty(root: Path) -> bool | None:
    status = _git(root, "status", "--porcelain", "--", str(SCRIPTS), str(BDDL))
    return None if status is None else bool(status.strip())
