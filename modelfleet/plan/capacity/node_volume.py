"""Where a GPU node's pods write, and how large and fast that disk is: their emptyDirs and their images.

A GPU node's pods keep model repositories and Hugging Face caches in emptyDirs; a disk too small for them
gets pods evicted (or never scheduled: the kubelet offers only ``0.9 x disk - 1 GiB``, hardware/kubelet.py) long
after ``pulumi up`` succeeded, and a disk too slow for them never lets them start (``capacity/disk.py``).

Layout, per node group:

- **instance store** (the type has local NVMe that holds a node full of its hungriest pods, their images and
  the DaemonSets' allowance): the node's bootstrap stripes the NVMe disks RAID0 and puts the kubelet's and
  containerd's directories on it (AL2023: nodeadm's ``localStorage: {strategy: RAID0}``; Bottlerocket: its
  ``apiclient ephemeral-storage init/bind`` bootstrap command), so emptyDirs and images live there. The
  root volume then holds the OS only: the stack's floor (``deploy.nodeDiskGib``) at gp3's baseline;
- **root volume** otherwise (the root volume on AL2023, the data volume on Bottlerocket): sized so that the
  pods' requests, their images, the allowance and the OS stay under the kubelet's eviction threshold, and
  provisioned for the cold starts' writes (capacity/disk.py).
"""

from __future__ import annotations

import math

from ...spec.environment import DaemonSetAllowance
from . import disk
from ..hardware.instances import InstanceType
from ..hardware.kubelet import DISK_EVICTION_FRACTION, KUBE_RESERVED_DISK_GIB, ephemeral_allocatable_gib
from ..types import FleetPlan, TritonServerPlan, VllmModelPlan, VolumePlan

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
    """A vLLM pod's Hugging Face cache emptyDir: the checkpoint it downloads (none when streamed from S3) plus
    10%, 5 GiB (tokenizer, compile caches), and the pinned LoRA adapters the download step fetches."""
    return disk_gib(5 + 1.1 * disk.vllm_download_gib(model) + len(model.lora_downloads) * lora_adapter_gib(model))


def lora_adapter_gib(model: VllmModelPlan) -> float:
    """An upper bound of one adapter's files: vLLM's LoRA buffers on all of a replica's GPUs hold max_loras
    adapters at max_rank (16-bit, as adapters are saved), so at least one whole adapter."""
    return model.lora_gib * model.tensor_parallel_size * model.pipeline_parallel_size


def _scratch_per_gpu(plan: FleetPlan, group: str) -> tuple[float, set[str]]:
    """The most any of the group's workloads writes per pod slot it holds (a GPU, or a whole CPU node), and the
    images they run."""
    per_gpu, images = 0.0, set()
    for server in plan.triton_servers:
        if server.node_group == group:
            per_gpu = max(per_gpu, triton_scratch_gib(server, plan) / server.slots_per_replica)
            images.add(server.image)
    for model in plan.models:
        if isinstance(model, VllmModelPlan) and model.node_group == group:
            per_gpu = max(per_gpu, (hf_cache_gib(model) + 1) / model.gpus_per_pod)
            images.add(model.image)
    return per_gpu, images


def serving_images_gib(plan: FleetPlan, group: str) -> int:
    """The serving images the group's pods run, unpacked on the pods' disk."""
    return IMAGE_GIB * len(_scratch_per_gpu(plan, group)[1])


def pods_disk_need_gib(plan: FleetPlan, group: str, allowance: DaemonSetAllowance) -> float:
    """What one node full of the group's most disk-hungry pods needs on the pods' disk: their requests,
    their images and the DaemonSets' allowance."""
    per_gpu, _ = _scratch_per_gpu(plan, group)
    return (per_gpu * plan.node_group(group).pod_slots + serving_images_gib(plan, group)
            + allowance.ephemeral_storage_gib)


def node_disk_gib(plan: FleetPlan, group: str, floor_gib: int, ami_type: str,
                  allowance: DaemonSetAllowance = DaemonSetAllowance()) -> int:
    """Root volume size of a group whose pods write to it: their needs and the OS below the kubelet's eviction
    threshold (and the kube-reserved GiB within what is left), rounded up to 10 GiB; never below the
    stack's ``deploy.nodeDiskGib``."""
    need = pods_disk_need_gib(plan, group, allowance) + SYSTEM_GIB + KUBE_RESERVED_DISK_GIB
    size = need / (1 - DISK_EVICTION_FRACTION[ami_type])
    return max(floor_gib, ROUND_GIB * math.ceil(size / ROUND_GIB))


def on_instance_store(plan: FleetPlan, group: str, instance: InstanceType, ami_type: str,
                      allowance: DaemonSetAllowance) -> bool:
    """The group's pods write to the instance store when it has one that holds what they need."""
    store = instance.instance_store_gib
    return store > 0 and ephemeral_allocatable_gib(store, ami_type) >= pods_disk_need_gib(plan, group, allowance)


def size_root_volume(plan: FleetPlan, group: str, floor_gib: int, ami_type: str = "AL2023_x86_64_NVIDIA",
                     allowance: DaemonSetAllowance = DaemonSetAllowance(), store: bool = False) -> VolumePlan:
    """The gp3 volume of the group's nodes: the OS only (``store``: the pods write to the instance store),
    else sized for the pods and provisioned for their cold starts."""
    if store:
        return VolumePlan(size_gib=floor_gib, iops=disk.GP3_BASELINE_IOPS, throughput_mibps=disk.GP3_BASELINE_MIBPS)
    throughput = disk.throughput_mibps(plan, group)
    return VolumePlan(size_gib=node_disk_gib(plan, group, floor_gib, ami_type, allowance), iops=disk.iops(throughput),
                      throughput_mibps=throughput)
