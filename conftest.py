"""Repository-level conftest: kept light (nothing heavy is imported here).

pytest-libero itself is loaded through its pytest11 entry point. This is the place for
repository-local `pytest_libero_*` hook implementations (for example a local policy adapter via
`pytest_libero_make_policy`); see docs/writing-adapters.md.
"""
