"""The policy host on one GPU node: prepared, NOT yet run (no GPU machine was lent; docs/performance.md).

On a machine with one NVIDIA GPU, torch and LIBERO installed (EGL rendering on the GPU):

    MUJOCO_GL=egl python benchmarks/bench_policy_host_gpu.py             # everything below, once
    MUJOCO_GL=egl python benchmarks/bench_policy_host_gpu.py --repeat 3

It prints, each part as its own script prints it:

  1. cost model, real LIBERO, -n 16 on GPU 0: per-worker copies vs one batched host
     (bench_policy_host.py --workers 16; the cost model is a SIMULATED GPU: a device lock and
     a + b*B sleeps, a = 100 ms, b = 8 ms)
  2. a small real torch model, randomly initialised (no download): a convolutional encoder of the
     two 256x256 images and a linear head to a (K, 7) chunk in [-1, 1], on cuda:0; the same
     copies-vs-host comparison at -n 16 (16 copies on one GPU against one host batching them)
  3. the simulated-simulator benchmark at 16, 32 and 64 workers (bench_policy_host_simulated.py)

`--dry-run` prints the commands without running them (what CI and a CPU machine can check).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent


class TorchModel:
    """A small randomly initialised network on the GPU, batched (act_batch) or one at a time (act).

    Seeded, in eval mode and deterministic for a given input; the chunk depends on the images, so
    the answer is a real forward pass (no result is cached).
    """

    def __init__(self, rows: int = 5, width: int = 64, seed: int = 0, device: str = "cuda:0") -> None:
        import torch  # imported here: the benchmark's --help and --dry-run need no torch

        torch.manual_seed(seed)
        self.torch, self.rows, self.device = torch, rows, device
        nn = torch.nn
        self.net = nn.Sequential(
            nn.Conv2d(6, width, 8, stride=4), nn.ReLU(), nn.Conv2d(width, width, 4, stride=2), nn.ReLU(),
            nn.Conv2d(width, width, 3, stride=2), nn.ReLU(), nn.AdaptiveAvgPool2d(4), nn.Flatten(),
            nn.Linear(width * 16, 512), nn.ReLU(), nn.Linear(512, rows * 7), nn.Tanh()).to(device).eval()

    def _forward(self, observations: list[Any]) -> Any:
        import numpy as np

        torch = self.torch
        stacked = np.stack([np.concatenate([o.images["agentview"], o.images["robot0_eye_in_hand"]], axis=-1)
                            for o in observations])
        with torch.inference_mode():
            x = torch.from_numpy(stacked).to(self.device).permute(0, 3, 1, 2).float().div_(255.0)
            y = self.net(x).reshape(len(observations), self.rows, 7)
            y[..., 6] = -1.0  # gripper open: the chunk stays valid whatever the random weights say
            return y.double().cpu().numpy()

    def reset(self, language: str) -> None:
        pass

    def act(self, observation: Any) -> Any:
        return self._forward([observation])[0]

    def act_batch(self, requests: Any) -> list[Any]:
        return list(self._forward([r.observation for r in requests]))

    def close(self) -> None:
        pass


def torch_model(**kwargs: Any) -> TorchModel:
    return TorchModel(**kwargs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--tasks", default="0,1,2,3,4,5,6,7,8,9", help="LIBERO-10 task ids (development scope)")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--gpu", default="0")
    parser.add_argument("--skip-torch", action="store_true")
    parser.add_argument("--dry-run", action="store_true", help="print the commands only")
    args = parser.parse_args()
    python = sys.executable
    common = ["--workers", str(args.workers), "--tasks", args.tasks, "--calls", str(args.calls),
              "--repeat", str(args.repeat)]
    commands = [[python, str(HERE / "bench_policy_host.py"), *common, "--extra", "--libero-gpus", args.gpu]]
    if not args.skip_torch:
        commands.append([python, str(HERE / "bench_policy_host.py"), *common, "--model",
                         f"{Path(__file__).resolve()}:torch_model", "--extra", "--libero-gpus", args.gpu])
    commands.append([python, str(HERE / "bench_policy_host_simulated.py"), "--workers", "16", "32", "64",
                     "--repeat", str(args.repeat)])
    env = dict(os.environ, MUJOCO_GL=os.environ.get("MUJOCO_GL", "egl"))
    print(f"GPU node run: MUJOCO_GL={env['MUJOCO_GL']}, GPU {args.gpu}, -n {args.workers}", flush=True)
    for command in commands:
        print("$ " + " ".join(command), flush=True)
        if not args.dry_run:
            subprocess.run(command, env=env, check=False)


if __name__ == "__main__":
    main()
