"""Node volumes sized and provisioned for what the pods on them write: their emptyDirs and their images.

A GPU node's pods keep model repositories and Hugging Face caches in emptyDirs on the node's volume (the
root volume on AL2023, the data volume on Bottlerocket); a disk too small for them gets pods evicted (or
never scheduled) long after ``pulumi up`` succeeded, and a disk too slow for them never lets them start
(``disk.py``).
"""

from __future__ import annotations

import math

from . import disk
from .types import FleetPlan, TritonServerPlan, VllmModelPlan, VolumePlan

IMAGE_GIB = 40  # one serving image unpacked (Triton and vLLM are each about 20 GB) and its layers during the pull
SYSTEM_GIB = 20  # the OS, kubelet and container logs, the daemonsets' images
ROUND_GIB = 10


def disk_gib(size_gib: float) -> int:
    """An emptyDir's size limit in whole GiB, at least 1."""
    return max(1, math.ceil(size_gib))


def repository_gib(server: TritonServerPlan, plan: FleetPlan) -> int:
    """A Triton pod's /models emptyDir: twice the weights (an artifact may keep more than one version) and 2 GiB."""
    return disk_gib(2 + 2 * disk.triton_download_gib(server, plan))


def triton_scratch_gib(server: TritonServerPlan, plan: FleetPlan) -> int:
    """Everything a Triton pod writes to its node's disk: the repository and /tmp."""
    return repository_gib(server, plan) + 1


def hf_cache_gib(model: VllmModelPlan) -> int:
    """A vLLM pod's Hugging Face cache emptyDir: the checkpoint plus 10% and 5 GiB (tokenizer, compile caches)."""
    return disk_gib(5 + 1.1 * disk.vllm_download_gib(model))


def _scratch_per_gpu(plan: FleetPlan, group: str) -> tuple[float, set[str]]:
    """The most any of the group's workloads writes per GPU it holds, and the images they run."""
    per_gpu, images = 0.0, set()
    for server in plan.triton_servers:
        if server.node_group == group:
            per_gpu = max(per_gpu, triton_scratch_gib(server, plan) / server.gpus_per_replica)
            images.add(server.image)
    for model in plan.models:
        if isinstance(model, VllmModelPlan) and model.serving == "vllm" and model.node_group == group:
            per_gpu = max(per_gpu, (hf_cache_gib(model) + 1) / model.gpus_per_pod)
            images.add(model.image)
    return per_gpu, images


def node_disk_gib(plan: FleetPlan, group: str, floor_gib: int) -> int:
    """Volume size of the group's nodes: a node full of its most disk-hungry pods, their images and the
    system, rounded up to 10 GiB; never below the stack's ``deploy.nodeDiskGib``."""
    per_gpu, images = _scratch_per_gpu(plan, group)
    need = per_gpu * plan.node_group(group).gpus_per_node + IMAGE_GIB * len(images) + SYSTEM_GIB
    return max(floor_gib, ROUND_GIB * math.ceil(need / ROUND_GIB))


def size_root_volume(plan: FleetPlan, group: str, floor_gib: int) -> VolumePlan:
    """The gp3 volume of the group's nodes: its size, and the throughput and IOPS its cold starts need."""
    throughput = disk.throughput_mibps(plan, group)
    return VolumePlan(size_gib=node_disk_gib(plan, group, floor_gib), iops=disk.iops(throughput),
                      throughput_mibps=throughput)
