"""The project's exception hierarchy.

Usage errors on the command line are `pytest.UsageError`; only the plugin layer raises them
(it imports pytest): a bad option value found below it is an `OptionError`, which the plugin's
options edge turns into a `pytest.UsageError` with the same message. Every other failure the
harness can name is a `LiberoError`. The split that matters for outcomes:
a `PolicyFault` is the policy's doing (the item fails with reason policy_error), an
`EnvironmentFault` is the simulator's or the harness's (the item errors).
"""

from __future__ import annotations


class LiberoError(Exception):
    """Base class of every pytest-libero error."""


class OptionError(LiberoError):
    """A bad command-line value, found below the plugin layer; reported as a pytest.UsageError."""


class CatalogError(LiberoError):
    """The frozen catalog or inventory is unreadable or invalid."""


class InventoryMismatch(LiberoError):
    """Installed LIBERO files differ from the frozen source inventory."""


class PolicyFault(LiberoError):
    """The policy misbehaved: an adapter exception or an output that breaks the contract."""


class ActionError(PolicyFault):
    """An action chunk failed validation; nothing of it reached the simulator."""


class PolicyLoadError(LiberoError):
    """The requested policy could not be built (bad spec, factory failure)."""


class EnvironmentFault(LiberoError):
    """The simulator or the harness failed: service crash, exception or timeout, render failure."""


class PolicyServerError(PolicyFault):
    """A remote policy server failed on its side of the wire: a malformed or oversized reply, its own
    error message, no reply within the request deadline, a connection that closed or a reconnect
    that failed. The policy's side of the wire is the policy, so this is a policy fault (the episode
    ends as policy_error), as the same fault of an in-process or isolated policy is.

    Raised while the policy is built (a server unreachable when the run starts), it stops the run
    as a usage error (exit 4) like any other build failure.
    """
