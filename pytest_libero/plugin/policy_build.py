"""The run's policy, built once in the process that runs items, and what the xdist controller checks of
it before any worker starts (plugin/__init__.py calls these from its hooks)."""

from __future__ import annotations

import contextlib
import sys
from typing import Any

import pytest

from pytest_libero.errors import PolicyLoadError
from pytest_libero.plugin.options import LiberoRun, hook_names


def policy_paths(run: LiberoRun) -> tuple[str, ...]:
    return tuple(getattr(run.adapter, "policy_paths", lambda context: ())(run.context))


def add_policy_paths(run: LiberoRun) -> None:
    """A benchmark may make modules of its own importable to policies (optional `policy_paths(context)`:
    RoboMemArena's adapters import its policy_adapter from the checkout)."""
    for path in policy_paths(run):
        if path not in sys.path:
            sys.path.append(path)


def build_policy(config: pytest.Config, run: LiberoRun) -> Any:
    """The checked policy (reset and act; close optional), or a pytest.UsageError of one line."""
    from pytest_libero.runtime.policies import build_failure_line, check_policy_object, close_policy
    from pytest_libero.runtime.policies import unknown_policy_message

    spec = run.policy
    policy: Any = None
    add_policy_paths(run)
    try:
        if run.isolation == "process":
            from pytest_libero.runtime.isolation import ProcessPolicy

            policy = ProcessPolicy(spec, timeout_s=run.policy_timeout_s, python=run.policy_python)
        elif run.isolation == "host":
            from pytest_libero.plugin.policy_host import client
            from pytest_libero.plugin.gpus import pinned

            policy = client(config, run, policy_paths(run), pinned(config))
        else:
            policy = config.hook.pytest_libero_make_policy(config=config, spec=spec)
            if policy is None:
                raise PolicyLoadError(unknown_policy_message(spec.name, hook_names(config)))
        return check_policy_object(policy, spec)
    except Exception as exc:  # noqa: BLE001 - any failure to build is the user's to fix, reported once
        if policy is not None:
            with contextlib.suppress(Exception):  # a failing close() never hides the real cause
                close_policy(policy)
        raise pytest.UsageError(build_failure_line(spec, exc)) from None


def check_on_controller(config: pytest.Config, run: LiberoRun, hosted: bool) -> None:
    """On the xdist controller (which runs no item): what can be checked without building the
    policy (the factory loads and takes the kwargs); pytest.UsageError of one line."""
    from pytest_libero.runtime.policies import build_failure_line, dry_check

    spec = run.policy
    add_policy_paths(run)
    try:
        if run.policy_python is None:
            dry_check(spec)
        elif not hosted:  # the factory loads in the policy's interpreter, not this one
            from pytest_libero.runtime.isolation import check_in

            check_in(run.policy_python, spec, policy_paths(run))
        # else the host builds it in that interpreter, before any worker, a failure the same usage
        # error: a check first would start that interpreter twice (a LeRobot policy's imports alone
        # cost 10-30 s of CPU).
    except Exception as exc:  # noqa: BLE001 - reported once, as a usage error
        raise pytest.UsageError(build_failure_line(spec, exc)) from None
