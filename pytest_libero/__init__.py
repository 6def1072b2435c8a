"""pytest-libero: LIBERO evaluations as pytest items under a frozen protocol.

Public API for adapter authors. Importing it loads numpy, never the simulator.
"""

from pytest_libero.core.cells import Cell
from pytest_libero.core.contract import STOP, Counters, Observation
from pytest_libero.errors import (
    ActionError, EnvironmentFault, InventoryMismatch, LiberoError, PolicyFault, PolicyLoadError,
    PolicyServerError,
)
from pytest_libero.core.policy import Policy, PolicySpec

__all__ = [
    "STOP", "ActionError", "Cell", "Counters", "EnvironmentFault", "InventoryMismatch", "LiberoError",
    "Observation", "Policy", "PolicyFault", "PolicyLoadError", "PolicyServerError", "PolicySpec",
]
