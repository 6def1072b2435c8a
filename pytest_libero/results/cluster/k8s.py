"""A sharded run as a Kubernetes Indexed Job: the manifest `submit k8s --dry-run` prints.

Completion index i runs shard i+1 with the same bash as a Slurm array task
(pytest_libero.results.cluster.jobs.shard_command). YAML is written by PyYAML.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from typing import Any

import yaml

from pytest_libero.results.cluster.jobs import ClusterError, check_counts, check_pytest_args, shard_command


@dataclass(frozen=True)
class K8sSpec:
    """A batch/v1 Indexed Job: completion index i runs shard i+1 into <mount>/<name>/shard-<i+1>."""

    shards: int
    pytest_args: tuple[str, ...]
    image: str = "registry.example.com/libero-eval:latest"
    name: str = "libero-eval"
    parallelism: int | None = None
    gpus_per_shard: int | None = None
    claim: str = "libero-runs"
    mount: str = "/runs"
    python: str = "python"
    retries_per_shard: int = 2

    def __post_init__(self) -> None:
        check_counts(self, "parallelism", "gpus_per_shard")
        if not self.image.strip():
            raise ClusterError("--image is empty: give the container image with pytest-libero installed")
        if not re.fullmatch(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", self.name):
            raise ClusterError(f"--name {self.name!r}: a Job name is a DNS label (lower-case letters, digits and "
                               "'-', at most 63 characters), e.g. libero-eval")
        if not self.mount.startswith("/"):
            raise ClusterError(f"--mount {self.mount!r}: give an absolute path inside the container, e.g. /runs")
        check_pytest_args(self.pytest_args)

    @property
    def folder(self) -> str:
        return f"{self.mount.rstrip('/')}/{self.name}"


def k8s_manifest(spec: K8sSpec) -> dict[str, Any]:
    script = "\n".join(["set -euo pipefail", *shard_command(spec.python, shlex.quote(spec.folder),
                                                            "JOB_COMPLETION_INDEX", spec.shards, spec.pytest_args)])
    container: dict[str, Any] = {"name": "eval", "image": spec.image, "command": ["bash", "-c"],
                                 "args": [script + "\n"],
                                 "volumeMounts": [{"name": "runs", "mountPath": spec.mount}]}
    if spec.gpus_per_shard:
        container["resources"] = {"limits": {"nvidia.com/gpu": spec.gpus_per_shard}}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": spec.name},
        "spec": {
            "completionMode": "Indexed",
            "completions": spec.shards,
            "parallelism": spec.parallelism or spec.shards,
            # A failed shard is retried alone, continuing its folder.
            "backoffLimitPerIndex": spec.retries_per_shard,
            "template": {"spec": {
                "restartPolicy": "Never",
                "containers": [container],
                "volumes": [{"name": "runs", "persistentVolumeClaim": {"claimName": spec.claim}}],
            }},
        },
    }


def k8s_text(spec: K8sSpec) -> str:
    """The manifest as YAML, headed by how to apply it and merge afterwards."""
    folder = spec.folder
    return "\n".join([
        f"# pytest-libero: {spec.shards} shard(s) as a Kubernetes Indexed Job; index i runs shard i+1.",
        "# kubectl apply -f this.yaml; when it has finished, from any pod or machine mounting the volume:",
        f"#   python -m pytest_libero merge {folder}/merged {folder}/shard-*/*/*/",
        to_yaml(k8s_manifest(spec)),
    ])




class _Dumper(yaml.SafeDumper):
    """Block-style YAML whose multi-line strings (the container's script) are literal blocks."""


def _string(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _string)


def to_yaml(data: dict[str, Any]) -> str:
    """Block-style YAML of plain data, multi-line strings as literal blocks, keys in their order."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False)
