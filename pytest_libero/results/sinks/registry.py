"""The built-in sinks by name: what --libero-sink takes."""

from __future__ import annotations

from pytest_libero.results.sinks.common import SinkKind

NAMES = ("wandb", "mlflow", "tensorboard")


def kinds() -> dict[str, SinkKind]:
    """The built-in sinks by name (what --libero-sink takes)."""
    from pytest_libero.results.sinks.mlflow_sink import KIND as MLFLOW
    from pytest_libero.results.sinks.tensorboard_sink import KIND as TENSORBOARD
    from pytest_libero.results.sinks.wandb_sink import KIND as WANDB

    return {kind.name: kind for kind in (WANDB, MLFLOW, TENSORBOARD)}
