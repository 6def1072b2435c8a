"""What the cluster commands share: their error, how they run a command, and the shard's bash.

No pytest import here (the shards' pytest runs in its own process). See
pytest_libero.results.cluster.slurm for the folder a submission lives in.
"""

from __future__ import annotations

import shlex
import subprocess
from typing import Any, Callable, Sequence

from pytest_libero.errors import LiberoError

# Options every shard gets from submit itself; the user's copy would fight them.
OWNED_PYTEST_OPTIONS = ("--libero-shard", "--libero-shard-count", "--libero-output", "--libero-resume")
# Slurm job states in which a job may still run (anything else has ended).
ACTIVE_STATES = frozenset({"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED", "REQUEUE_HOLD",
                           "REQUEUE_FED", "RESIZING", "SUSPENDED", "SIGNALING", "STAGE_OUT", "STOPPED"})

# argv -> (exit code, stdout, stderr)
Runner = Callable[[Sequence[str]], "tuple[int, str, str]"]


class ClusterError(LiberoError):
    """A submission or status request that cannot go ahead; the message names the value and the fix."""


def run_command(argv: Sequence[str]) -> tuple[int, str, str]:
    """The default Runner: run `argv` here; a missing program is exit 127 with a message."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True)
    except FileNotFoundError:
        return 127, "", f"{argv[0]}: command not found"
    return done.returncode, done.stdout, done.stderr


def check_counts(spec: Any, *optional: str) -> None:
    """A spec's shard count is at least 1, and each optional count (by field name) absent or positive."""
    if spec.shards < 1:
        raise ClusterError(f"--shards {spec.shards}: give at least 1 shard")
    for name in optional:
        value = getattr(spec, name)
        if value is not None and value < 1:
            raise ClusterError(f"--{name.replace('_', '-')} {value}: give a positive number, or leave it out")


def check_pytest_args(args: Sequence[str]) -> None:
    for arg in args:
        if arg.split("=", 1)[0] in OWNED_PYTEST_OPTIONS:
            raise ClusterError(f"{arg!r} among the pytest options: submit gives every shard "
                               f"{', '.join(OWNED_PYTEST_OPTIONS[:3])} (RUN/shard-K) and --libero-resume on a "
                               "rerun itself; drop it")


def shard_command(python: str, base: str, shard_var: str, count: int, args: Sequence[str]) -> list[str]:
    """Bash lines that run shard $SHARD of `count` into `base`/shard-$SHARD, resuming it when it exists.

    Shared by the sbatch script and the Kubernetes container, so both behave the same."""
    user = " ".join(shlex.quote(a) for a in args)
    return [
        f"SHARD=$(({shard_var} + 1))",
        f'OUT={base}/shard-"$SHARD"',
        "# Run again, a shard continues its own folder: completed episodes are kept, nothing runs twice.",
        "RESUME=()",
        'for previous in "$OUT"/*/*/run.json; do',
        '    if [ -f "$previous" ]; then RESUME=(--libero-resume "$(dirname "$previous")"); fi',
        "done",
        "STATUS=0",
        f'{shlex.quote(python)} -m pytest -p no:cacheprovider --libero-shard "$SHARD/{count}" '
        f'--libero-output "$OUT" "${{RESUME[@]}}"' + (f" \\\n    {user}" if user else "") + " || STATUS=$?",
        "# pytest's exit 1 says episodes failed (or were left unattempted): results, kept in the records.",
        "# The job itself fails only when pytest could not run (exit 2-5) or was killed.",
        'if [ "$STATUS" -eq 1 ]; then exit 0; fi',
        'exit "$STATUS"',
    ]
