"""The `libero` benchmark: the five standard LIBERO suites and LIBERO-PRO's 16 perturbed copies.

Its adapter is `pytest_libero.benchmarks.libero.adapter.ADAPTER`; its service module (the only
code here importing LIBERO) is `pytest_libero.benchmarks.libero.service`. Nothing is imported here.
"""
