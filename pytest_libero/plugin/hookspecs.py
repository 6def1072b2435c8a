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

    Called once per worker process (once per session without xdist), the first time an episode
    needs the policy. The first non-None result wins; the built-in resolver (registered names
    and ``path/to/file.py:factory``) runs last. The returned object must have
    ``reset(language)``, ``act(observation)`` and ``close()`` (see ``pytest_libero.Policy``).

    Example, in a conftest.py::

        def pytest_libero_make_policy(spec):
            if spec.name == "mymodel":
                return MyModelPolicy(**spec.kwargs)
    """


def pytest_libero_policy_names(config: pytest.Config) -> list[str]:  # type: ignore[empty-body]
    """Return the policy names this plugin can build (for ``--libero-policy`` checking and help).

    Called on every process at configure time, once. Each implementation returns a list; names
    not listed by any implementation (nor built in) are a usage error with a suggestion.
    """
