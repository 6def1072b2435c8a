"""The pytest-libero extension API: `pytest_libero_*` hook specifications.

Implement them in a conftest.py, a `-p` plugin or an installed package's pytest11 entry point.
Implementations may accept fewer arguments than the spec, so specs can grow.
"""

from __future__ import annotations

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
