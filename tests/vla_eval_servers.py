"""A scripted model server built on PyPI vla-eval's own `PredictModelServer`, for the tests and
benchmarks/bench_vla_eval.py.

`ScriptedServer` answers with actions that depend only on the control index (`ctx.step`, the
observations the server has seen in the episode, plus the row in the chunk), so every client
that sends one observation per control (vla-eval's LIBERO benchmark) or re-sends one per buffered
action (this suite's client with actions_per_call) gets the same actions at the same controls. A
batch of B observations costs `cost_a_s + cost_b_s * B` of sleep: a simulated GPU, stated where
it is used. With `chunk_size` the server keeps vla-eval's chunk buffer (one (7,) action per
observation); without it it answers the whole (chunk, 7) chunk.

    python tests/vla_eval_servers.py --chunk 5 --max-batch-size 4 --cost-a 0.1 --cost-b 0.008
        prints "PORT <n>" once it listens on 127.0.0.1, then serves until killed (--stats FILE: the
        batch sizes, rewritten every 0.5 s).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import threading
import time
from typing import Any, Iterator

import numpy as np


def scripted_action(control: int) -> np.ndarray:
    """The action at control `control`: a slow deterministic sweep, gripper open then closed."""
    t = float(control)
    return np.array([0.4 * np.sin(0.11 * t), 0.4 * np.cos(0.07 * t), 0.3 * np.sin(0.05 * t), 0.0, 0.0,
                     0.1 * np.sin(0.03 * t), -1.0 if control < 60 else 1.0], dtype=np.float32)


def scripted_chunk(first_control: int, rows: int) -> np.ndarray:
    return np.stack([scripted_action(first_control + i) for i in range(rows)])


def make_server(chunk: int = 5, buffered: bool = True, max_batch_size: int = 1, max_wait_time: float = 0.01,
                cost_a_s: float = 0.0, cost_b_s: float = 0.0, observation_params: dict[str, Any] | None = None,
                fail_at_step: int | None = None) -> Any:
    """A ScriptedServer (a vla_eval PredictModelServer subclass); vla-eval is imported here."""
    from vla_eval.model_servers.predict import PredictModelServer

    class ScriptedServer(PredictModelServer):
        def __init__(self) -> None:
            super().__init__(chunk_size=chunk if buffered else None, max_batch_size=max_batch_size,
                             max_wait_time=max_wait_time)
            self.seen: list[dict[str, Any]] = []  # every observation predict_batch got, with its step
            self.batch_sizes: list[int] = []
            self.episode_starts: list[dict[str, Any]] = []
            self.lock = threading.Lock()

        def get_observation_params(self) -> dict[str, Any]:
            return dict(observation_params or {})

        async def on_episode_start(self, config: dict[str, Any], ctx: Any) -> None:
            self.episode_starts.append(config)
            await super().on_episode_start(config, ctx)

        def predict_batch(self, obs_batch: list[Any], ctx_batch: list[Any]) -> list[Any]:
            time.sleep(cost_a_s + cost_b_s * len(obs_batch))  # the simulated GPU
            with self.lock:
                self.batch_sizes.append(len(obs_batch))
                for obs, ctx in zip(obs_batch, ctx_batch, strict=True):
                    self.seen.append({**obs, "step": ctx.step})
            if fail_at_step is not None and any(ctx.step == fail_at_step for ctx in ctx_batch):
                raise RuntimeError(f"scripted failure at step {fail_at_step}")
            return [{"actions": scripted_chunk(ctx.step, chunk)} for ctx in ctx_batch]

    return ScriptedServer()


@contextlib.contextmanager
def serving(model: Any) -> Iterator[int]:
    """Serve `model` with vla-eval's own `serve_async` on 127.0.0.1 (a free port) in a thread; the port."""
    from anyio.from_thread import start_blocking_portal
    from vla_eval.model_servers.serve import serve_async

    with start_blocking_portal() as portal:
        future, port = portal.start_task(serve_async, model, "127.0.0.1", 0)
        try:
            yield int(port)
        finally:
            future.cancel()


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunk", type=int, default=5)
    parser.add_argument("--unbuffered", action="store_true", help="answer the whole chunk (no chunk_size)")
    parser.add_argument("--max-batch-size", type=int, default=1)
    parser.add_argument("--max-wait-time", type=float, default=0.01)
    parser.add_argument("--cost-a", type=float, default=0.0, help="seconds per batch")
    parser.add_argument("--cost-b", type=float, default=0.0, help="seconds per observation in a batch")
    parser.add_argument("--stats", default=None, help="write the batch sizes (JSON) to this file every 0.5 s")
    args = parser.parse_args(argv)
    model = make_server(args.chunk, not args.unbuffered, args.max_batch_size, args.max_wait_time,
                        args.cost_a, args.cost_b)
    with serving(model) as port:
        print(f"PORT {port}", flush=True)
        while True:  # until killed
            time.sleep(0.5)
            if args.stats:
                tmp = f"{args.stats}.tmp"
                with open(tmp, "w") as out:
                    json.dump({"batch_sizes": list(model.batch_sizes)}, out)
                os.replace(tmp, args.stats)


if __name__ == "__main__":
    main(sys.argv[1:])
