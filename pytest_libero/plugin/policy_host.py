"""`--libero-policy-isolation host` in pytest: the controller starts one policy host per GPU
(one on a machine without GPUs) before any worker, hands each xdist worker the address of its
GPU's host through workerinput (as it hands it the GPU: plugin/gpus.py), and closes the hosts at
the end. Without xdist the single process starts the one host of its GPU itself. The host
processes and the worker's client are pytest_libero.runtime.host's.
"""

from __future__ import annotations

import os
import shutil
from typing import Any

import pytest

from pytest_libero.plugin.worker import worker_name
from pytest_libero.runtime.host import HostPolicy, HostSettings, PolicyHost, host_folder, host_name

HOSTS_KEY = pytest.StashKey[dict[str, PolicyHost]]()  # host name -> the controller's PolicyHost


def add_options(group: Any) -> None:
    group.addoption("--libero-policy-max-batch", dest="libero_policy_max_batch", type=int, default=8,
                    metavar="N", help="Under --libero-policy-isolation host: at most N pending requests per "
                                      "act_batch call (default 8)")
    group.addoption("--libero-policy-max-wait-ms", dest="libero_policy_max_wait_ms", type=float, default=5.0,
                    metavar="MS", help="Under --libero-policy-isolation host: how long the first pending request "
                                       "waits for others to join its batch (default 5; it stops waiting once "
                                       "every connected worker has a request pending)")


def settings(config: pytest.Config, call_timeout_s: float) -> HostSettings:
    """The host settings from the options; a bad value is a usage error naming it."""
    found = HostSettings(max_batch=config.getoption("libero_policy_max_batch"),
                         max_wait_ms=config.getoption("libero_policy_max_wait_ms"), call_timeout_s=call_timeout_s)
    try:
        found.check()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    return found


def start_hosts(config: pytest.Config, run: Any, gpus: list[dict[str, Any] | None], paths: tuple[str, ...]) -> None:
    """Start (and build) one host per GPU; PolicyLoadError from the first that cannot be built."""
    if HOSTS_KEY in config.stash:
        return
    folder = host_folder()
    hosts: dict[str, PolicyHost] = {}
    config.stash[HOSTS_KEY] = hosts
    for gpu in gpus:
        host = PolicyHost(run.policy, settings(config, run.policy_timeout_s), folder, host_name(gpu), gpu, paths,
                          python=run.policy_python)
        hosts[host_name(gpu)] = host
        host.start()


def close_hosts(config: pytest.Config) -> None:
    hosts = config.stash.get(HOSTS_KEY, None)
    if hosts is None:
        return
    del config.stash[HOSTS_KEY]
    folder = None
    for host in hosts.values():
        folder = os.path.dirname(host.path)
        host.close()
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)


class XdistHosts:
    """Controller plugin: each worker gets the address of its GPU's host (after plugin.gpus gave it its GPU)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    @pytest.hookimpl(optionalhook=True, trylast=True)
    def pytest_configure_node(self, node: Any) -> None:
        hosts = self.config.stash[HOSTS_KEY]
        host = hosts[host_name(node.workerinput.get("libero_gpu"))]
        node.workerinput["libero_policy_host"] = host.address


def controller_gpus(config: pytest.Config) -> list[dict[str, Any] | None]:
    """The GPUs the xdist controller hands out (plugin.gpus), or [None] without GPUs."""
    found = config.pluginmanager.get_plugin("libero-gpus")
    listed = [gpu.as_dict() for gpu in found.assignment.gpus] if found is not None else []
    return listed or [None]


def start_for_xdist(config: pytest.Config, run: Any, paths: tuple[str, ...]) -> None:
    """The xdist controller's part: the hosts, and the plugin that hands out their addresses."""
    start_hosts(config, run, controller_gpus(config), paths)
    config.pluginmanager.register(XdistHosts(config), "libero-policy-hosts")


def client(config: pytest.Config, run: Any, paths: tuple[str, ...], gpu: dict[str, Any] | None) -> HostPolicy:
    """This process's policy: a client of its GPU's host (an xdist worker's from workerinput; a
    single process, pinned to `gpu`, starts its host first)."""
    workerinput = getattr(config, "workerinput", None)
    worker = worker_name(config)
    if workerinput is not None:
        address = workerinput["libero_policy_host"]
    else:
        start_hosts(config, run, [gpu], paths)
        address = config.stash[HOSTS_KEY][host_name(gpu)].address
    return HostPolicy(address, timeout_s=run.policy_timeout_s, worker=worker)
