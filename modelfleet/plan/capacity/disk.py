"""How fast a GPU node's pods can fill their caches: the node volume's bandwidth, shared by the pods that
cold-start on it together, and the startup budgets that follow from it.

A pod downloads its model (the whole Hugging Face checkpoint per node where it is not staged to S3, see
llm/weights.py; or a Triton server's artifacts) into an emptyDir on the node's volume at about
``DOWNLOAD_GIB_PER_S``, then loads it from there; weights streamed from S3 land on no disk. A gp3 volume
writes 125 MiB/s unless more is provisioned: a p5 node of a 405B model writing 756 GiB at that rate needs
100 minutes, far past any startup probe. So groups whose nodes download a lot get provisioned gp3
throughput, and every budget is computed from the bandwidth the pod really gets.

Where the instance type has local NVMe (every GPU type in the catalogue does), the pods write there instead
(capacity/node_volume.py): the node's bootstrap stripes it RAID0 for the kubelet and containerd, it writes at
``INSTANCE_STORE_GIB_PER_S`` or more, costs nothing beyond the instance, and is several times the size a gp3
volume would need. gp3 (provisioned as above) remains for types without one.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..serving.engine_args import DOWNLOAD_GIB_PER_S
from ..types import FleetPlan, TritonModelPlan, TritonServerPlan, VllmModelPlan, WeightsPlan

GP3_BASELINE_MIBPS, GP3_MAX_MIBPS = 125, 1000
GP3_BASELINE_IOPS = 3000
GP3_IOPS_PER_MIBPS = 4  # AWS: throughput may be at most 0.25 MiB/s per provisioned IOPS
# A node that downloads at least this much per cold start gets gp3's maximum throughput: at the baseline
# writing it would take 7 minutes or more (the download itself under 2), and the pods read it back after.
# About 40 USD a month per node (0.04 per MiB/s above 125, 0.005 per IOPS above 3000): nothing beside a
# GPU node whose pods download that much; below, it would buy little.
PROVISION_FROM_GIB = 50
# What a node's instance store (RAID0 of its NVMe disks) writes, at least: one NVMe disk of the smallest GPU
# types writes about 1 GB/s sequentially (the EC2 storage pages' figures), larger types stripe several.
INSTANCE_STORE_GIB_PER_S = 1.0


def weights_of(model: VllmModelPlan) -> WeightsPlan:
    assert model.weights is not None  # the compiler sets every vLLM model's (plan/llm/weights.py)
    return model.weights


def from_hub(model: VllmModelPlan) -> bool:
    """Every pod downloads the Hub checkpoint into its emptyDir (with the token), rather than streaming it from
    S3 with the pod's role (an s3:// artifact, or a Hub checkpoint staged there once: plan/llm/weights.py)."""
    return weights_of(model).source == "hub"


def staged(model: VllmModelPlan) -> bool:
    """A Hub checkpoint a Job copies to S3 once per revision (with the token), which the pods stream."""
    return weights_of(model).source == "staged"


def downloads_from_hub(model: VllmModelPlan) -> bool:
    """The pod fetches something from the Hub before vLLM starts (with the token): a Hub checkpoint, or
    pinned LoRA adapters (an s3:// checkpoint may carry them too)."""
    return from_hub(model) or bool(model.lora_downloads)


def pod_reads_hub(model: VllmModelPlan) -> bool:
    """The serving pod reads the Hub: its checkpoint, or adapters (pinned ones in the download step, unpinned
    ones fetched by vLLM itself)."""
    return from_hub(model) or bool(model.lora_adapters)


def needs_hub_token(model: VllmModelPlan) -> bool:
    """The pod or the staging Job reads the Hub: private and gated repositories need the stack's hfToken."""
    return pod_reads_hub(model) or staged(model)


def checkpoint_gib(model: VllmModelPlan) -> float:
    """What is downloaded: the checkpoint as stored (16-bit when vLLM quantizes while loading)."""
    return model.checkpoint_gib if model.checkpoint_gib is not None else model.weights_gib


@dataclass(frozen=True)
class _Index:
    """One pass over a plan: models by name and each group's pods, so that asking about every workload of a
    1,000-model fleet stays linear (``plan.model`` scans the models)."""

    models: dict[str, TritonModelPlan | VllmModelPlan]
    # group -> (pod slots: its GPUs, or 1 on a CPU node; GiB downloaded) of one pod per workload
    pods: dict[str, list[tuple[int, float]]]


_last: list = [None, None]  # the last plan asked about and its index (plans are immutable)


def _index(plan: FleetPlan) -> _Index:
    if _last[0] is not plan:
        models = {m.name: m for m in plan.models}
        pods: dict[str, list[tuple[int, float]]] = {}
        for server in plan.triton_servers:
            gib = sum(models[n].weights_gib for n in server.models)
            pods.setdefault(server.node_group, []).append((server.slots_per_replica, gib))
        for model in plan.models:
            if isinstance(model, VllmModelPlan):
                pods.setdefault(model.node_group, []).append((model.gpus_per_pod, vllm_download_gib(model)))
        _last[:] = [plan, _Index(models, pods)]
    return _last[1]


def triton_download_gib(server: TritonServerPlan, plan: FleetPlan) -> float:
    """What a Triton pod's init container copies into /models: its models' artifacts."""
    models = _index(plan).models
    return sum(models[n].weights_gib for n in server.models)


def vllm_download_gib(model: VllmModelPlan) -> float:
    """Every node of a hub model downloads the whole checkpoint; runai_streamer streams S3 to the GPUs."""
    return checkpoint_gib(model) if from_hub(model) else 0.0


def _pods(plan: FleetPlan, group: str) -> list[tuple[int, float]]:
    """(pod slots, GiB downloaded) of one pod of each workload placed on the group."""
    return _index(plan).pods.get(group) or [(1, 0.0)]


def concurrent_pods(plan: FleetPlan, group: str) -> int:
    """Pods that may cold-start together on one node (a fresh node gets all of its pods at once)."""
    return max(1, plan.node_group(group).pod_slots // min(gpus for gpus, _ in _pods(plan, group)))


def node_download_gib(plan: FleetPlan, group: str) -> float:
    """What one node downloads when filled with the group's most download-hungry pods."""
    per_gpu = max(gib / gpus for gpus, gib in _pods(plan, group))
    return per_gpu * plan.node_group(group).pod_slots


def throughput_mibps(plan: FleetPlan, group: str) -> int:
    """gp3's maximum for groups whose nodes download a lot (see PROVISION_FROM_GIB), its baseline else."""
    return GP3_MAX_MIBPS if node_download_gib(plan, group) >= PROVISION_FROM_GIB else GP3_BASELINE_MIBPS


def iops(throughput: int) -> int:
    """The least gp3 allows for ``throughput``: the pods write and read large sequential blocks."""
    return max(GP3_BASELINE_IOPS, GP3_IOPS_PER_MIBPS * throughput)


def node_disk_gib_s(plan: FleetPlan, group: str) -> float:
    """How fast one node's pods' disk writes: its instance store, or its root volume's throughput."""
    node_group = plan.node_group(group)
    if node_group.ephemeral_storage_on == "instance-store":
        return INSTANCE_STORE_GIB_PER_S
    return node_group.root_volume_throughput_mibps / 1024


def pod_disk_gib_s(plan: FleetPlan, group: str) -> float:
    """One pod's share of its node's disk when every pod on the node starts at once."""
    return node_disk_gib_s(plan, group) / concurrent_pods(plan, group)


def pod_download_gib_s(plan: FleetPlan, group: str) -> float:
    """A pod downloads at the network rate or its disk share, whichever is slower."""
    return min(DOWNLOAD_GIB_PER_S, pod_disk_gib_s(plan, group))
