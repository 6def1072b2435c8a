"""A third, test-only benchmark adapter ("toy") and its fake service module, in one file.

The proof that the benchmark seam holds: nothing here is known to generic code, which reaches it
only through the `pytest_libero.benchmarks` entry-point group (tests/test_benchmark_seam.py
registers it with a temporary dist-info folder). It declares its own observation and action spec
(SPEC: one 48x64 camera, 4-D actions, unlike LIBERO's two 256x256 cameras and 7-D actions), which
generic code reads for every check, so LIBERO's built-in policies are refused here and the toy
brings its own (ToyPolicy, a `path/to/file.py:factory` policy). The service side has no
simulator: blank images, and an episode succeeds when the policy's action x-component is
positive from control SUCCESS_AFTER on (task n1 of each suite) or never (task n2). Deterministic.
`--libero-toy-inits N` gives every task N init states (ids `toy_red-n1`, `toy_red-n1-i1`, ...), enough
cells for a sequential comparison to decide before the end (tests/test_sequential_runs.py).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from pytest_libero.core.benchmark import Group, OptionSpec, Selection, Unattempted
from pytest_libero.core.cells import Cell, bracketed
from pytest_libero.core.contract import Observation
from pytest_libero.core.hashing import sha256_bytes
from pytest_libero.core.spec import BenchmarkSpec
from pytest_libero.errors import OptionError

NAME = "toy"
SUITES = ("toy_red", "toy_blue")
TASKS = {"toy_red": ("stack the red cubes", "hide the red cube"),
         "toy_blue": ("stack the blue cubes", "hide the blue cube")}
COLOURS = ("red", "blue", "green")
SUCCESS_AFTER = 3  # success needs a positive x-component at or after this control (task n1 only)
_ID = re.compile(r"(?P<suite>toy_(?:red|blue))-n(?P<task>[1-9])(?:-i(?P<init>[1-9][0-9]*))?")
SPEC = BenchmarkSpec(name=NAME, cameras=("overhead",), image_shape=(48, 64, 3), camera_transform="image",
                     action_size=4, action_low=-1.0, action_high=1.0, settle_action=(0.0, 0.0, 0.0, 0.0),
                     horizons=(("toy_red", 12, "the toy's own cap"), ("toy_blue", 12, "the toy's own cap")))


@dataclass(frozen=True, slots=True)
class ToyCell(Cell):
    """A toy cell: `<suite>-n<task number from 1>`, with `-i<init>` for init states after the first."""

    @property
    def id(self) -> str:
        return f"{self.suite}-n{self.task_index + 1}" + (f"-i{self.init_index}" if self.init_index else "")


def parse(text: str) -> tuple[str, int, int] | None:
    found = _ID.fullmatch(bracketed(text))
    if found is None or int(found.group("task")) > len(TASKS[found.group("suite")]):
        return None
    return found.group("suite"), int(found.group("task")) - 1, int(found.group("init") or 0)


def _hash(text: str) -> str:
    return sha256_bytes(text.encode())


class ToyAdapter:
    name = NAME
    description = "toy: a test-only benchmark with a fake service (no simulator)"
    service_module = "toy_benchmark"
    source: Mapping[str, Any] = {"repository": "https://example.invalid/toy-benchmark", "revision": "0" * 40}
    spec = SPEC

    def options(self) -> Sequence[OptionSpec]:
        return (OptionSpec(("--libero-toy-colour",), dict(dest="libero_toy_colour", default=None, choices=COLOURS,
                                                           help="The toy's colour (part of the protocol)")),
                OptionSpec(("--libero-toy-inits",), dict(dest="libero_toy_inits", type=int, default=1,
                                                          help="Init states per toy task (part of the protocol)")))

    def select(self, settings: Mapping[str, Any]) -> Selection:
        suite = settings.get("libero_suite")
        if suite is not None and suite not in SUITES:
            raise OptionError(f"--libero-suite {suite}: the toy benchmark has suites {', '.join(SUITES)}")
        inits = settings.get("libero_toy_inits") or 1
        if inits < 1:
            raise OptionError(f"--libero-toy-inits {inits}: must be at least 1")
        cells = tuple(ToyCell(s, i, n) for s in SUITES if suite in (None, s) for i in range(len(TASKS[s]))
                      for n in range(inits))
        colour = settings.get("libero_toy_colour") or "red"
        options = (("colour", colour),) + ((("inits", inits),) if inits > 1 else ())
        return Selection(cells, {"benchmark_options": options}, {"colour": colour})

    def cell_id(self, text: str) -> str | None:
        parsed = parse(text)
        return ToyCell(*parsed).id if parsed is not None else None

    def suites(self) -> Sequence[str]:
        return SUITES

    def keywords(self, cell: Cell) -> Sequence[str]:
        return (TASKS[cell.suite][cell.task_index].replace(" ", "_"),)

    def cell_fields(self, cell_id: str, settings: Mapping[str, Any], context: Any, *,
                    bulk: bool = False) -> dict[str, Any]:
        parsed = parse(cell_id)
        if parsed is None:
            raise ValueError(f"{cell_id!r} is not a toy cell id (toy_<colour>-nN)")
        suite, index, init = parsed
        colour = dict(settings.get("benchmark_options") or {}).get("colour") or (context or {}).get("colour")
        cell = ToyCell(suite, index, init)
        return {"id": cell.id, "suite": suite, "task_index": index, "task_name": TASKS[suite][index].replace(" ", "_"),
                "language": TASKS[suite][index], "init_index": init, "task_order_index": 0, "seed": cell.seed,
                "benchmark": {"name": NAME, "colour": colour}}

    def record_fields(self, record: dict[str, Any], evidence: Mapping[str, Any]) -> None:
        if "toy_max_x" in evidence:
            record["cell"]["benchmark"]["max_x"] = evidence["toy_max_x"]
        record["cell"]["benchmark"]["service_colour"] = evidence.get("toy_service_colour")

    def unattempted(self, service: Any, cell: Cell) -> Unattempted | None:
        return None

    def service_env(self, context: Any) -> dict[str, str]:
        return {"TOY_BENCHMARK_COLOUR": (context or {}).get("colour", "red")}

    def summary_blocks(self, cells: list[str], records: Mapping[str, dict[str, Any]], group: Group,
                       summary: Mapping[str, Any]) -> dict[str, Any]:
        toy = [c for c in cells if parse(c) is not None]
        if not toy:
            return {}
        by_task = {f"n{n}": group([c for c in toy if (parse(c) or ("", -1, 0))[1] == n - 1]) for n in (1, 2)}
        return {"toy": {"benchmark": NAME, "by_task_number": by_task, "overall": group(toy)}}

    def html_block(self, summary: Mapping[str, Any]) -> str:
        toy = summary.get("toy")
        if not toy:
            return ""
        return (f'<div class="toy"><p>TOY: {toy["overall"]["passed"]} of {toy["overall"]["selected"]} '
                "toy cells passed</p></div>")

    def terminal_lines(self, summary: Mapping[str, Any]) -> list[str]:
        toy = summary.get("toy")
        if not toy:
            return []
        return [f"TOY: task {name}: passed {g['passed']} of {g['selected']}" for name, g in
                toy["by_task_number"].items()]

    def task_label(self, cell: Mapping[str, Any]) -> str | None:
        return f"toy task n{cell['task_index'] + 1}"


ADAPTER = ToyAdapter()


class ToyPolicy:
    """The toy's policy: 4-D chunks, x-component `push` (0: never succeeds). It refuses (raises) any
    observation that is not the toy's spec, so an episode that runs at all received the toy's images."""

    def __init__(self, push: float = 0.0, chunk_size: int = 5) -> None:
        self.chunk = np.zeros((chunk_size, SPEC.action_size))
        self.chunk[:, 0] = push

    def reset(self, language: str) -> None:
        pass

    def act(self, observation: Observation) -> Any:
        shapes = {camera: image.shape for camera, image in observation.images.items()}
        if shapes != {camera: SPEC.image_shape for camera in SPEC.cameras}:
            raise AssertionError(f"the toy policy received images {shapes}, not the toy's")
        return self.chunk.copy()


# -- the service module (run inside the bench service process) ------------------------------


def prepare_process_environment(work_dir: str) -> None:
    pass


def import_simulator() -> None:
    pass


class EnvCache:
    def close(self) -> None:
        pass


def check_sources(cache: EnvCache) -> str | None:
    return None


SERVICE_OPS: dict[str, Any] = {}

# A worker crash on demand (tests/test_harness_faults.py): with this variable naming a folder, the
# service of xdist worker gw0 kills its worker (its parent) in the middle of its first episode,
# once, and the service of any later worker (a replacement) leaves a mark that it ran an episode.
CRASH_DIR_ENV = "TOY_CRASH_DIR"


def crash_gate(folder: str | None) -> None:
    if not folder:
        return
    import signal

    killed = os.path.join(folder, "killed")
    worker = os.environ.get("PYTEST_XDIST_WORKER")  # the service inherits its worker's environment
    if worker == "gw0" and not os.path.exists(killed):
        with open(killed, "x"):
            pass
        os.kill(os.getppid(), signal.SIGKILL)
    elif worker not in ("gw0", "gw1"):
        with open(os.path.join(folder, f"reached-by-{worker}"), "a"):
            pass


def _blank() -> dict[str, np.ndarray]:
    return {camera: np.zeros(SPEC.image_shape, dtype=np.uint8) for camera in SPEC.cameras}


class Episode:
    def __init__(self, cell: dict[str, Any], control_cap: int, settle_controls: int, cache: EnvCache,
                 options: dict[str, Any] | None = None, **_: Any) -> None:
        self.key = f"{cell['suite']}-{cell['task_index']}"
        if os.environ.get("TOY_BENCHMARK_BROKEN"):  # a machine where every build fails (tests/test_fail_fast.py)
            raise FileNotFoundError(f"toy asset /tmp/toy-assets/{self.key}-{cell.get('init_index', 0)}/scene.xml "
                                    "is missing")
        self.task_index = cell["task_index"]
        self.control_cap = control_cap
        self.executed = 0
        self.first: int | None = None
        self.max_x: float | None = None
        colour = (options or {}).get("colour", "red")
        self.language = TASKS[cell["suite"]][cell["task_index"]] + f" ({colour})"
        self.first_raw = None
        self.settling_controls = settle_controls

    def observation(self, raw: Any) -> dict[str, np.ndarray]:
        return _blank()

    def state(self, raw: Any) -> None:
        return None

    def submit(self, chunk: np.ndarray, deliver: bool, frames: bool = False) -> dict[str, Any]:
        crash_gate(os.environ.get(CRASH_DIR_ENV))
        chunk = np.asarray(chunk)
        before = self.executed
        success = False
        rendered = []
        for action in chunk[: max(0, self.control_cap - self.executed)]:
            self.executed += 1
            self.max_x = float(action[0]) if self.max_x is None else max(self.max_x, float(action[0]))
            if frames:
                rendered.append(_blank())
            if self.task_index == 0 and self.executed >= SUCCESS_AFTER and action[0] > 0:
                success = True
                self.first = self.executed
                break
        truncated = not success and self.executed >= self.control_cap
        observation = _blank() if deliver and not success and not truncated else None
        return {"executed": self.executed - before, "executed_total": self.executed, "success": success,
                "truncated": truncated, "observation": observation, "state": None,
                "frames": rendered if frames else None}

    def finish(self, final_frame: bool = False) -> dict[str, Any]:
        return {"first_success_control": self.first, "executed_controls": self.executed,
                "settling_controls": self.settling_controls, "timing": {"setup_s": 0.0},
                "final_frame": _blank() if final_frame else None,
                "bddl_sha256": _hash(self.key), "init_states_file_sha256": _hash(self.key + "init"),
                "selected_state_sha256": _hash(self.key + "state"),
                "final_state_sha256": _hash(f"{self.key}/{self.executed}"), "toy_max_x": self.max_x,
                # what service_env put in this process's environment
                "toy_service_colour": os.environ.get("TOY_BENCHMARK_COLOUR")}

    def close(self) -> None:
        pass
