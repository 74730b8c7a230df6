"""What the kubelet of an EKS GPU node offers pods: its allocatable CPU, memory, ephemeral storage, GPUs and
pods, as the node's AMI family configures the kubelet at boot.

    allocatable = capacity - kube-reserved - system-reserved - the hard eviction threshold

Both GPU AMI families reserve the same way (Bottlerocket copied EKS's formulas):

- AL2023, nodeadm (awslabs/amazon-eks-ami, ``nodeadm/internal/kubelet/config.go``:
  ``withDefaultReservedResources``, ``getCPUMillicoresToReserve``, ``GetMemoryMebibytesToReserve``,
  ``defaultKubeletSubConfig``): kube-reserved CPU 6% of the first core, 1% of the second, 0.5% of cores 3-4
  and 0.25% of the rest; memory 255 MiB + 11 MiB per pod of maxPods; ephemeral-storage 1 GiB; no
  system-reserved; evictionHard ``memory.available<100Mi``, ``nodefs.available<10%``,
  ``nodefs.inodesFree<5%``.
- Bottlerocket (bottlerocket-os/bottlerocket, ``sources/api/schnauzer/src/helpers.rs``:
  ``kube_reserve_cpu``, ``kube_reserve_memory``, "taken from EKS' calculations"; kube-reserved
  ephemeral-storage 1 GiB): the same reserves. It sets no evictionHard of its own, so the kubelet's
  defaults apply, which add ``imagefs.available<15%``; images and emptyDirs share one filesystem there
  (``/local``, or the instance store it binds), so 15% of that disk is counted as held back.

maxPods: the VPC CNI's limit for the type (``eni-max-pods.txt`` in amazon-eks-ami), capped as EKS managed
node groups cap it: 110 on types of 30 vCPUs or fewer, 250 above (``calculateMaxPods`` in the same
repository's ``nodeadm/internal/kubelet/util.go``).

Memory capacity is what the kernel reports, not the type's nominal RAM: it is taken as 92.5% of it, the
VM overhead Karpenter assumes before a node exists (its ``vmMemoryOverheadPercent`` default, 0.075).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...spec.environment import DaemonSetAllowance
from .instances import InstanceType

GIB_MIB = 1024
# AMI family -> the share of the pods' disk the kubelet holds back (the hard eviction threshold on it). The CPU
# node groups boot the same family without the NVIDIA driver (node_ami_type), with the same kubelet settings.
DISK_EVICTION_FRACTION = {"AL2023_x86_64_NVIDIA": 0.10, "BOTTLEROCKET_x86_64_NVIDIA": 0.15,
                          "AL2023_x86_64_STANDARD": 0.10, "BOTTLEROCKET_x86_64": 0.15}
CPU_AMI_TYPE = {"AL2023_x86_64_NVIDIA": "AL2023_x86_64_STANDARD", "BOTTLEROCKET_x86_64_NVIDIA": "BOTTLEROCKET_x86_64"}


def node_ami_type(ami_type: str, device: str) -> str:
    """The EKS AMI type a node group boots: the stack's (GPU) AMI, or its CPU sibling for a CPU group."""
    return CPU_AMI_TYPE[ami_type] if device == "cpu" else ami_type
KUBE_RESERVED_DISK_GIB = 1.0  # both families
EVICTION_MEMORY_MIB = 100  # memory.available<100Mi, both families
VM_MEMORY_OVERHEAD = 0.075  # Karpenter's vmMemoryOverheadPercent default
DEFAULT_MAX_PODS = 110  # the kubelet's own default, for a type the ENI table lacks
CPU_BANDS = ((1000, 600), (2000, 100), (4000, 50), (None, 25))  # (band's upper end in millicores, 1/10,000ths)


@dataclass(frozen=True)
class Allocatable:
    """What pods on one node may request, as the kubelet reports it in ``status.allocatable``."""

    cpu_millis: int
    memory_mib: int
    ephemeral_storage_gib: float
    gpus: int
    pods: int


def max_pods(instance: InstanceType) -> int:
    """The kubelet's maxPods on an EKS managed node group of ``instance``."""
    eni = instance.eni_max_pods if instance.eni_max_pods is not None else DEFAULT_MAX_PODS
    return min(eni, 250 if instance.vcpu > 30 else 110)


def kube_reserved_cpu_millis(vcpu: int) -> int:
    """nodeadm's ``getCPUMillicoresToReserve``: a share of each band of the node's cores."""
    total, start, reserved = vcpu * 1000, 0, 0
    for end, per_10000 in CPU_BANDS:
        top = total if end is None else min(total, end)
        if top > start:
            reserved += (top - start) * per_10000 // 10_000
        start = end or total
    return reserved


def kube_reserved_memory_mib(pods: int) -> int:
    """nodeadm's ``GetMemoryMebibytesToReserve`` (and Bottlerocket's ``kube_reserve_memory``)."""
    return 11 * pods + 255


def memory_capacity_mib(instance: InstanceType) -> int:
    return math.floor(instance.ram_gib * GIB_MIB * (1 - VM_MEMORY_OVERHEAD))


def memory_allocatable_mib(instance: InstanceType) -> int:
    """The same on every AMI family: capacity less kube-reserved and the memory eviction threshold."""
    return memory_capacity_mib(instance) - kube_reserved_memory_mib(max_pods(instance)) - EVICTION_MEMORY_MIB


def memory_share_gib(instance: InstanceType, ami_type: str, allowance: DaemonSetAllowance, gpus_per_pod: int) -> float:
    """A pod's share (its GPUs of the node's) of the memory the kubelet offers, the allowance set aside (the
    same on both AMI families)."""
    kept = allowance.for_node(instance.vcpu, instance.gpus).memory_gib
    assert kept is not None  # for_node resolves the default
    free_gib = memory_allocatable_mib(instance) / GIB_MIB - kept
    return free_gib * gpus_per_pod / instance.gpus


def ephemeral_allocatable_gib(disk_gib: float, ami_type: str) -> float:
    """The kubelet's allocatable ephemeral storage on a pods' disk of ``disk_gib``."""
    return max(0.0, disk_gib * (1 - DISK_EVICTION_FRACTION[ami_type]) - KUBE_RESERVED_DISK_GIB)


def allocatable(instance: InstanceType, ami_type: str, pods_disk_gib: float) -> Allocatable:
    """``pods_disk_gib``: the filesystem the kubelet's pods write to (the instance store's RAID0, else the
    root or data volume)."""
    return Allocatable(cpu_millis=instance.vcpu * 1000 - kube_reserved_cpu_millis(instance.vcpu),
                       memory_mib=memory_allocatable_mib(instance),
                       ephemeral_storage_gib=round(ephemeral_allocatable_gib(pods_disk_gib, ami_type), 2),
                       gpus=instance.gpus, pods=max_pods(instance))
