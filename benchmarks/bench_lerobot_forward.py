"""What batching can win on this machine's CPU: a LeRobot ACT forward, two copies against one batch.

The episode-level benchmark (bench_lerobot_host.py) compares per-worker copies with one batched
host under `-n 2`, simulators included. This one isolates the policy's side of that comparison,
with the same ACT (random weights, no pretrained backbone) built in the cached LeRobot venv
(tests/lerobot_helpers.py), side by side in one run:

  copies  two processes at the same time, 1 torch thread each, each a forward of one observation
          (what two per-worker copies do when both workers' requests are out together)
  host    one process, 2 torch threads, one forward of a batch of two observations (the host's
          batch of 2; a plain batched `predict_action_chunk`, which is cheaper than the adapter's
          bit-exact path, so an upper bound on what the host gains)
  alone   one process, 1 thread, one observation, nothing beside it (the reference cost)

It prints seconds per forward for each and the ratio copies / host: the most the host can gain per
decision over the copies when the model's forward is all a decision costs. With the simulators
beside it, the episode's ratio lies between 1 and this one. Real torch on the CPU, not a simulation.

    python benchmarks/bench_lerobot_forward.py --runs 3                          # ACT's size
    python benchmarks/bench_lerobot_forward.py --dim-model 1024 --layers 8 --feedforward 4096
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))  # the cached LeRobot venv the tests use

from lerobot_helpers import lerobot_venv  # noqa: E402

# Run in the LeRobot venv: build the ACT, time `repeats` forwards of a batch of `batch` observations.
FORWARD = r'''
import json, sys, time, torch
from lerobot.configs.types import FeatureType, PolicyFeature
from lerobot.policies.act.configuration_act import ACTConfig
from lerobot.policies.act.modeling_act import ACTPolicy
threads, batch, repeats, dim, layers, heads, feedforward, chunk = map(int, sys.argv[1:9])
torch.set_num_threads(threads)
torch.manual_seed(0)
image = PolicyFeature(FeatureType.VISUAL, (3, 256, 256))
config = ACTConfig(input_features={"observation.images.image": image, "observation.images.image2": image,
                                   "observation.state": PolicyFeature(FeatureType.STATE, (8,))},
                   output_features={"action": PolicyFeature(FeatureType.ACTION, (7,))}, device="cpu",
                   chunk_size=chunk, n_action_steps=5, pretrained_backbone_weights=None, dim_model=dim,
                   dim_feedforward=feedforward, n_heads=heads, n_encoder_layers=layers, n_decoder_layers=1,
                   use_vae=False)
policy = ACTPolicy(config).eval()
frame = {"observation.images.image": torch.rand(batch, 3, 256, 256),
         "observation.images.image2": torch.rand(batch, 3, 256, 256), "observation.state": torch.rand(batch, 8)}
with torch.inference_mode():
    policy.predict_action_chunk(frame)  # the first call allocates; not timed
    sys.stdout.write("ready\n"); sys.stdout.flush()
    sys.stdin.readline()  # start together with the other copy
    start = time.perf_counter()
    for _ in range(repeats):
        policy.predict_action_chunk(frame)
    print(json.dumps({"s_per_forward": (time.perf_counter() - start) / repeats}))
'''


def forwards(python: Path, jobs: list[tuple[int, int]], args: argparse.Namespace) -> list[float]:
    """Seconds per forward of each (threads, batch) job, the jobs timed at the same time."""
    sizes = [args.repeats, args.dim_model, args.layers, args.heads, args.feedforward, args.chunk_size]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    processes = [subprocess.Popen([str(python), "-c", FORWARD, *map(str, (threads, batch, *sizes))],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
                 for threads, batch in jobs]
    for process in processes:  # every model built and warmed before any is timed
        assert process.stdout is not None and process.stdout.readline().strip() == "ready", "forward failed"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.flush()
    times = []
    for process in processes:
        out, _ = process.communicate()
        if process.returncode != 0:
            raise SystemExit(f"the timed forward failed (exit {process.returncode})")
        times.append(json.loads(out.strip().splitlines()[-1])["s_per_forward"])
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dim-model", type=int, default=512)
    parser.add_argument("--layers", type=int, default=4, help="ACT's encoder layers")
    parser.add_argument("--heads", type=int, default=8)
    parser.add_argument("--feedforward", type=int, default=3200)
    parser.add_argument("--chunk-size", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=10, help="timed forwards per process")
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    python = lerobot_venv()
    for run in range(args.runs):
        load = os.getloadavg()[0]
        alone = forwards(python, [(1, 1)], args)[0]
        copies = forwards(python, [(1, 1), (1, 1)], args)
        host = forwards(python, [(2, 2)], args)[0]
        copies_s = max(copies)  # both decisions are answered when the slower copy is done
        print(json.dumps({"run": run, "alone_s": round(alone, 3), "copies_s": [round(c, 3) for c in copies],
                          "host_batch2_s": round(host, 3), "copies_over_host": round(copies_s / host, 3),
                          "load_1min_before": round(load, 2), "load_1min_after": round(os.getloadavg()[0], 2)}))


if __name__ == "__main__":
    main()
