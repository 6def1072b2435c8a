"""The `robomemarena` benchmark: RoboMemArena's memory tasks 1-26, scored by the user's own checkout.

RoboMemArena has no licence: nothing of it ships here. The user points the suite at a checkout
(--libero-robomemarena-checkout or PYTEST_LIBERO_ROBOMEMARENA); its adapter is
`pytest_libero.benchmarks.robomemarena.adapter.ADAPTER`, and its service module
(`pytest_libero.benchmarks.robomemarena.service`, the only code importing the checkout's LIBERO
fork and scorer) runs in the bench service process. Nothing is imported here.
"""
