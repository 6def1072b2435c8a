"""GPU pinning in pytest: the controller hands xdist workers their GPUs, each process keeps its own.

The slot logic and the EGL mapping are pytest_libero.runtime.gpus'; this module holds what
needs pytest: the xdist hooks, the usage error for a bad GPU list, and the pinned GPU kept in
`config.stash` (never in a module global), from which the bench service's environment and every
episode record's compute fields are made.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_libero.runtime import gpus

# This process's GPU (`Gpu.as_dict()`, None: CPU); `egl_device` is added once the service env maps it.
GPU_KEY = pytest.StashKey[dict[str, Any] | None]()


class XdistGpus:
    """Controller plugin: each xdist worker gets its GPU (runtime.gpus.GpuAssignment) through workerinput."""

    def __init__(self, found: list[gpus.Gpu]) -> None:
        self.assignment = gpus.GpuAssignment(found)

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        gpu = self.assignment.assign(node.gateway.id)
        node.workerinput["libero_gpu"] = gpu.as_dict() if gpu is not None else None

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        self.assignment.release(node.gateway.id)


def configure_controller(config: pytest.Config, option: str | None) -> None:
    """Find the run's GPUs (`--libero-gpus` as given); hand them to xdist workers, or pin this process."""
    from pytest_libero.plugin.options import usage_errors

    with usage_errors():
        found, _ = gpus.discover_gpus(option)
    if getattr(config.option, "dist", "no") != "no":
        config.pluginmanager.register(XdistGpus(found), "libero-gpus")
    elif found:
        config.stash[GPU_KEY] = gpus.pin_worker(found[0].as_dict())  # one process: the first GPU


def configure_worker(config: pytest.Config, workerinput: dict[str, Any]) -> None:
    """Pin this xdist worker to the GPU the controller gave it (before anything grabs a GPU)."""
    config.stash[GPU_KEY] = gpus.pin_worker(workerinput.get("libero_gpu"))


def pinned(config: pytest.Config) -> dict[str, Any] | None:
    """This process's GPU (None: CPU), with its EGL device index once `service_env` mapped it."""
    return config.stash.get(GPU_KEY, None)


def service_env(config: pytest.Config) -> dict[str, str]:
    """The bench service's environment for this process's GPU; the GPU kept now names its EGL device."""
    gpu = pinned(config)
    env, egl = gpus.service_env(gpu)
    if gpu is not None and egl is not None:
        config.stash[GPU_KEY] = dict(gpu, egl_device=egl)
    return env


def record_fields(config: pytest.Config) -> dict[str, Any]:
    """An episode record's compute fields: this process's GPU and the rendering backend."""
    return gpus.record_fields(pinned(config))
