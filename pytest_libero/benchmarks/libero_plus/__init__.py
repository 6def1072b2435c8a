"""The `libero_plus` benchmark: LIBERO-plus's 10,030 perturbed variants of the 40 standard tasks.

Its adapter is `pytest_libero.benchmarks.libero_plus.adapter.ADAPTER`; its service module (the only
code importing LIBERO-plus) is `pytest_libero.benchmarks.libero_plus.service`. Nothing is imported here.
"""
