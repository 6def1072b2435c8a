"""RoboMemArena's episode protocols as frozen presets, every number with where it comes from.

`robomemarena` is the protocol the benchmark's README states (seed 004: "--num-trials-per-task 51
--seed 50", "the default is 10 steps" of replanning); the README gives no step cap, post-goal or
settling numbers, so those are the runner's (run_all_tasks1_26.py at b175708, the newest commit
whose runner could be read). `robomemarena-b175708` is that script's own argparse defaults, which
differ from its README (50 trials from seed 100, replan 5). Fast mode runs each selected task once
at the `robomemarena` preset's first seed with its other settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from pytest_libero.errors import OptionError

RUNNER = "evaluation_benchmark/scripts/run_all_tasks1_26.py at b175708 (argparse defaults)"
README = "RoboMemArena evaluation_benchmark/README.md (seed 004): the documented run_all_tasks1_26.py command"


@dataclass(frozen=True, slots=True)
class Preset:
    name: str
    trials: int  # episodes per task: seeds seed_start .. seed_start + trials - 1 (seed + ep)
    seed_start: int
    replan_steps: int  # actions executed from each chunk (K)
    max_steps: int  # controls after settling (the episode's cap)
    post_goal_steps: int  # controls run on once the BDDL goal first holds
    settle_controls: int  # no-op controls [0]*6 + [-1] after reset (num_steps_wait)
    resize_size: int  # the adapter's image size (cv2 INTER_AREA from 480x640)
    sources: Mapping[str, str]

    def describe(self) -> list[str]:
        """The preset as lines (`python -m pytest_libero schedule NAME`, docs)."""
        rows = [("trials per task", f"{self.trials} (seeds {self.seed_start}..{self.seed_start + self.trials - 1}, "
                                    "np.random.seed and env.seed = seed + ep)", "trials"),
                ("replan steps K", str(self.replan_steps), "replan_steps"),
                ("max steps (cap)", str(self.max_steps), "max_steps"),
                ("post-goal steps", str(self.post_goal_steps), "post_goal_steps"),
                ("settling controls", f"{self.settle_controls} of [0,0,0,0,0,0,-1]", "settle_controls"),
                ("resize size", f"{self.resize_size} (observation/image, cv2 INTER_AREA from 480x640, np.flipud)",
                 "resize_size")]
        return [f"preset {self.name}"] + [f"  {label}: {value}  [{self.sources[key]}]" for label, value, key in rows]


PRESETS: dict[str, Preset] = {
    "robomemarena": Preset(
        name="robomemarena", trials=51, seed_start=50, replan_steps=10, max_steps=3000, post_goal_steps=200,
        settle_controls=10, resize_size=256,
        sources={"trials": README, "replan_steps": README + " ('The default is 10 steps')",
                 "max_steps": RUNNER + "; the README states none",
                 "post_goal_steps": RUNNER + "; the README states none",
                 "settle_controls": RUNNER + " (--num-steps-wait)", "resize_size": README + " and " + RUNNER}),
    "robomemarena-b175708": Preset(
        name="robomemarena-b175708", trials=50, seed_start=100, replan_steps=5, max_steps=3000, post_goal_steps=200,
        settle_controls=10, resize_size=256,
        sources={key: RUNNER for key in ("trials", "replan_steps", "max_steps", "post_goal_steps", "settle_controls",
                                         "resize_size")}),
}
DEFAULT = "robomemarena"


def get(name: str | None) -> Preset:
    try:
        return PRESETS[name or DEFAULT]
    except KeyError:
        raise OptionError(f"--libero-schedule {name}: RoboMemArena's presets are {', '.join(PRESETS)}") from None
