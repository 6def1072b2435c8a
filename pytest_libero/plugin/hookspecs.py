"""The pytest-libero extension API: `pytest_libero_*` hook specifications.

Implement them in a conftest.py, a `-p` plugin or an installed package's pytest11 entry point.
Implementations may accept fewer arguments than the spec, so specs can grow.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_libero.core.policy import PolicySpec


@pytest.hookspec(firstresult=True)
def pytest_libero_make_policy(config: pytest.Config, spec: PolicySpec) -> Any | None:
    """Build the policy for ``spec``, or return None when ``spec.name`` is not yours.

    Called once per worker process (once per session without xdist), after collection and before
    the first item. ``spec.name`` is the ``--libero-policy`` value, ``spec.kwargs`` the
    ``--libero-policy-kwargs`` dict; ``config`` is this process's pytest config. This hook alone
    serves a name (``pytest_libero_policy_names`` only lists it). The first non-None result wins;
    the built-in resolver (registered names and ``path/to/file.py:factory``) runs last. The
    returned object must have ``reset(language)`` and ``act(observation)``; ``close()`` is
    optional (see ``pytest_libero.Policy``). Any exception stops the run with one line (exit 4).

    Example, in a conftest.py::

        def pytest_libero_make_policy(spec):
            if spec.name == "mymodel":
                return MyModelPolicy(**spec.kwargs)
    """


def pytest_libero_policy_names(config: pytest.Config) -> list[str]:  # type: ignore[empty-body]
    """Return the policy names this plugin can build (for ``--libero-policy`` checking and help).

    Called on every process at configure time, once. Each implementation returns a list; the
    names are offered in listings and suggestions. Optional: a name only
    ``pytest_libero_make_policy`` builds is served all the same.
    """


def pytest_libero_record(config: pytest.Config, record: dict[str, Any], run_dir: Path) -> None:
    """One episode record of this run, as written to ``run_dir/episodes/<cell>.json`` (a dict).

    Called on the controller (the xdist controller, or the only process), once per cell, as soon as
    the controller learns of the cell's end: a worker's record when its report arrives, a record
    the controller writes itself (a crashed worker's cell; at the session end, cells that never
    ran) when it writes it, and on ``--libero-resume`` each record the run keeps. Every call
    comes before ``pytest_libero_summary``. Each implementation is called on its own: one that
    raises is warned about once (one line naming it), its plugin gets no more results calls this
    run (neither hook), the others go on, and the run's files, exit status and terminal summary
    are never touched by it. The record is parsed from the file for this call: changing it changes
    no file and no other implementation's record.

    Example, in a conftest.py::

        def pytest_libero_record(record):
            my_tracker.log(cell=record["cell"]["id"], success=record["outcome"]["outcome"] == "success")

    Built-in sinks (``--libero-sink wandb,mlflow,tensorboard``; docs/sinks-and-export.md) are
    implementations of this hook and ``pytest_libero_summary``.
    """


def pytest_libero_summary(config: pytest.Config, summary: dict[str, Any], run_dir: Path) -> None:
    """The run's summary (``run_dir/summary.json``'s content, a dict), once, at the session end.

    Called on the controller after the last ``pytest_libero_record``, when the derived files
    (summary.json, report.html) are written; not called when nothing was selected or with
    ``--collect-only``. Errors are handled as for ``pytest_libero_record``.
    """
