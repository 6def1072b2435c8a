"""`--libero-policy-python PATH`: the policy's child (isolated, or the policy host) in another Python.

That interpreter is the policy's own environment (a venv with numpy 2, torch, the model's
library); this suite's venv is never on its path. It gets exactly this suite's own pure modules
instead: `BOOTSTRAP`, run as `PATH -c BOOTSTRAP ROOTS MODULE FD`, registers the `pytest_libero`
package (and `pytest_libero.adapters`, which an editable install keeps in the checkout's adapters/
folder) from where they really are, then runs MODULE as `python -m` would. The modules a policy
child loads need only the standard library and numpy (1.24 or newer, below 3; tests/
test_policy_python.py checks it in a venv holding nothing else), and their calls cross the wire
of pytest_libero.runtime.wire. docs/own-python.md is the user's page.

`probe` checks the interpreter once, before anything starts (a usage error naming it and the
fix): it exists and runs, it is Python 3.10 or newer, it has a supported numpy.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from typing import Any

from pytest_libero.errors import OptionError

OPTION = "--libero-policy-python"
MIN_PYTHON = (3, 10)  # dataclass(slots=True), zip(strict=True)
MIN_NUMPY, MAX_NUMPY_MAJOR = (1, 24), 2
PROBE_TIMEOUT_S = 120.0
# Variables that would point the other interpreter at this suite's modules (or its own home).
WITHHELD_ENV = ("PYTHONPATH", "PYTHONHOME")

# Valid Python 2 and 3, so that an old interpreter is told it is old rather than failing to parse.
PROBE = """\
import json, sys
out = {"magic": "pytest-libero-probe", "version": list(sys.version_info[:3]), "executable": sys.executable}
try:
    import numpy
    out["numpy"] = str(numpy.__version__)
except Exception as exc:
    out["numpy"] = None
    out["numpy_error"] = "%s: %s" % (type(exc).__name__, exc)
sys.stdout.write("PYTEST-LIBERO-PROBE " + json.dumps(out) + "\\n")
"""

BOOTSTRAP = """\
import importlib.util, json, runpy, sys
for name, folder in json.loads(sys.argv[1]):
    spec = importlib.util.spec_from_file_location(name, folder + "/__init__.py", submodule_search_locations=[folder])
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    spec.loader.exec_module(module)
sys.argv = [sys.argv[2]] + sys.argv[3:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def package_roots() -> list[tuple[str, str]]:
    """Where this suite's packages really are: (import name, folder), parents first."""
    roots = []
    for name in ("pytest_libero", "pytest_libero.adapters"):
        spec = importlib.util.find_spec(name)
        assert spec is not None and spec.submodule_search_locations, name
        roots.append((name, os.path.abspath(list(spec.submodule_search_locations)[0])))
    return roots


def parse_version(text: str) -> tuple[int, ...]:
    """(major, minor) of a version string such as 2.1.3 or 2.3.0rc1."""
    numbers = re.findall(r"\d+", text)[:2]
    return tuple(int(n) for n in numbers)


@dataclass(frozen=True, slots=True)
class PolicyPython:
    """A checked interpreter for the policy: the path as given (absolute), and what it runs."""

    path: str
    executable: str
    python: str
    numpy: str

    def argv(self, module: str, fd: int) -> list[str]:
        """The command that runs `python -m module fd` there, with this suite's own packages."""
        return [self.path, "-c", BOOTSTRAP, json.dumps(package_roots()), module, str(fd)]

    def environ(self, env: dict[str, str] | None = None) -> dict[str, str]:
        """This process's environment and `env`, less what names this suite's Python's modules."""
        found = dict(os.environ, **(env or {}))
        for name in WITHHELD_ENV:
            found.pop(name, None)
        return found

    def install_hint(self, text: str) -> str:
        """`text`, and if it names a missing module, how to install it into this interpreter."""
        missing = re.search(r"No module named '([\w.]+)'", text)
        if missing is None:
            return text
        top = missing.group(1).split(".")[0]
        return (f"{text}; module {top!r} is missing from {OPTION} {self.path}: install it into that environment: "
                f"{self.path} -m pip install {top} (or the package that provides module {top!r})")


def probe(path: str, timeout_s: float = PROBE_TIMEOUT_S) -> PolicyPython:
    """The interpreter at `path`, checked; OptionError naming it and the fix otherwise."""
    given = f"{OPTION} {path}"
    full = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(full):
        raise OptionError(f"{given}: no such file; give the path of the policy environment's Python, "
                          "e.g. /path/to/venv/bin/python")
    if os.path.isdir(full):
        inside = os.path.join(full, "bin", "python")
        hint = f"; did you mean {inside}?" if os.path.isfile(inside) else ""
        raise OptionError(f"{given}: is a folder, not an interpreter{hint}")
    if not os.access(full, os.X_OK):
        raise OptionError(f"{given}: is not executable; give the Python interpreter itself (or chmod +x it)")
    env = dict(os.environ)
    for name in WITHHELD_ENV:
        env.pop(name, None)
    try:
        done = subprocess.run([full, "-c", PROBE], capture_output=True, text=True, timeout=timeout_s, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise OptionError(f"{given}: running it did not finish within {timeout_s:g} s; is it a Python "
                          "interpreter?") from None
    except OSError as exc:
        raise OptionError(f"{given}: cannot be run ({exc.strerror or exc}); give a Python interpreter") from None
    found = _probe_output(done.stdout)
    if found is None:
        said = (done.stderr or done.stdout).strip().splitlines()
        tail = f": it said {said[-1][:200]!r}" if said else f" (exit code {done.returncode}, no output)"
        raise OptionError(f"{given}: is not a Python interpreter{tail}; give the policy environment's "
                          "bin/python")
    version = tuple(found["version"])
    python = ".".join(map(str, version))
    if version < MIN_PYTHON:
        raise OptionError(f"{given}: is Python {python}; the policy's interpreter must be Python "
                          f"{'.'.join(map(str, MIN_PYTHON))} or newer: make its venv with a newer Python")
    numpy = found.get("numpy")
    wanted = f"'numpy>={'.'.join(map(str, MIN_NUMPY))},<{MAX_NUMPY_MAJOR + 1}'"
    if numpy is None:
        raise OptionError(f"{given}: has no numpy ({found.get('numpy_error')}); the policy wire needs it: "
                          f"{full} -m pip install {wanted}")
    numbers = parse_version(numpy)
    if numbers < MIN_NUMPY or numbers[:1] > (MAX_NUMPY_MAJOR,):
        raise OptionError(f"{given}: has numpy {numpy}, which the policy wire does not support (1.24 or newer, "
                          f"below 3): {full} -m pip install {wanted}")
    return PolicyPython(path=full, executable=str(found["executable"]), python=python, numpy=numpy)


def _probe_output(stdout: str) -> dict[str, Any] | None:
    for line in stdout.splitlines():
        if line.startswith("PYTEST-LIBERO-PROBE "):
            try:
                found = json.loads(line.split(" ", 1)[1])
            except ValueError:
                return None
            return found if isinstance(found, dict) and found.get("magic") == "pytest-libero-probe" else None
    return None


def where_it_runs() -> dict[str, Any]:
    """The record's note of the interpreter a policy runs in (asked in that interpreter)."""
    import platform

    import numpy

    return {"executable": sys.executable, "python": platform.python_version(), "numpy": numpy.__version__}
