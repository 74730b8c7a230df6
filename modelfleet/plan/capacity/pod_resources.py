"""What every container of a workload's pod requests: decided here, read by the fit check (capacity/fit.py) and by
the renderer (modelfleet.render.k8s), so that what is checked is what is deployed.

CPU: a pod holds its share of its node's GPUs, and gets the same share of the CPU its kubelet offers once
the DaemonSet allowance is set aside, so a node full of the group's pods leaves exactly the allowance free
(the serving pods used to take all but one core: on a p5.48xlarge 190 of 191.45 allocatable vCPU, 1.45 for
every DaemonSet). Memory: the plan's ``memory_request_gib`` (host RAM for the engine, its cache and shared
memory), checked against the allocatable share by capacity/fit.py. Ephemeral storage: everything the pod writes to its
node's disk (its emptyDirs), as capacity/node_volume.py sizes them.

Init containers run before the serving container and only the largest of them counts against the node
(capacity/fit.py's pod request): copying a Triton repository (aws s3 sync) or downloading a Hugging Face checkpoint
(``hf download``, which resumes a partial download after a restart, since the emptyDir outlives the
container) needs a few cores and a little RAM; waiting for a staged checkpoint (plan/llm/weights.py) almost nothing.
"""

from __future__ import annotations

import math

from ...spec.environment import DaemonSetAllowance
from .disk import downloads_from_hub, staged
from .node_volume import hf_cache_gib, triton_scratch_gib
from ..types import ContainerResourcesPlan, FleetPlan, NodeGroupPlan, PodPlan, TritonServerPlan, VllmModelPlan

REPOSITORY_INIT = ContainerResourcesPlan(name="model-repository", init=True, cpu_millis=500, memory_mib=512,
                                         ephemeral_storage_gib=0)
# hf download: a few parallel HTTP streams and their hashing; its page cache is the node's, not the pod's.
DOWNLOAD_INIT = ContainerResourcesPlan(name="model-download", init=True, cpu_millis=2000, memory_mib=2048,
                                       ephemeral_storage_gib=0)

# Waits for a staged checkpoint's marker in S3 (render/k8s/staging.py): one HEAD request every 30 s.
STAGED_WAIT_INIT = ContainerResourcesPlan(name="weights-staged", init=True, cpu_millis=50, memory_mib=128,
                                          ephemeral_storage_gib=0)


# The caller-counting proxy beside each Triton server of a stack that declares callers (render/k8s/callers.py):
# HAProxy holding at most CALLER_PROXY_CONNECTIONS connections (two 16 KiB buffers each: 32 MiB) and its own
# few MiB; its CPU comes out of the server's share, so a node full of the group's pods still leaves the allowance.
CALLER_PROXY_CONNECTIONS = 1000
CALLER_PROXY = ContainerResourcesPlan(name="callers", init=False, cpu_millis=250, memory_mib=96, ephemeral_storage_gib=0)


def caller_proxy(callers: tuple[str, ...]) -> ContainerResourcesPlan | None:
    """The proxy each Triton pod runs beside Triton where the stack declares ``callers``, else none."""
    return CALLER_PROXY if callers else None


def set_aside(callers: tuple[str, ...]) -> tuple[float, float]:
    """(cores, GiB) of a Triton pod a server may not size itself into: its caller proxy's requests
    (packing.server_ram_gib, cpu_placement.usable_cores and pod_ram_gib)."""
    proxy = caller_proxy(callers)
    return (proxy.cpu_millis / 1000, proxy.memory_mib / 1024) if proxy else (0.0, 0.0)


def cpu_share_millis(group: NodeGroupPlan, slots: int, allowance: DaemonSetAllowance) -> int:
    """The pod's share (its slots of the node's: its GPUs, or a whole CPU node) of the CPU the kubelet
    offers, the allowance set aside."""
    kept = allowance.for_node(group.vcpu, group.gpus_per_node).cpu
    assert kept is not None  # for_node resolves the default
    free = group.allocatable.cpu * 1000 - kept * 1000
    return max(100, math.floor(free * slots / group.pod_slots))


def triton_pod(server: TritonServerPlan, plan: FleetPlan, group: NodeGroupPlan, allowance: DaemonSetAllowance) -> PodPlan:
    """The repository's copy, Triton, and (callers declared) the proxy counting them, whose CPU is taken from
    Triton's share."""
    share = cpu_share_millis(group, server.slots_per_replica, allowance)
    proxy = caller_proxy(plan.callers)
    main = ContainerResourcesPlan(name="triton", init=False,
                                  cpu_millis=max(100, share - (proxy.cpu_millis if proxy else 0)),
                                  memory_mib=math.ceil(server.memory_request_gib * 1024),
                                  ephemeral_storage_gib=triton_scratch_gib(server, plan))
    return PodPlan(containers=(REPOSITORY_INIT, main, *((proxy,) if proxy else ())))


def vllm_pod(model: VllmModelPlan, group: NodeGroupPlan, allowance: DaemonSetAllowance) -> PodPlan:
    """Leader and worker pods alike (each holds all the GPUs of its node, and downloads its own copy)."""
    main = ContainerResourcesPlan(name="vllm", init=False,
                                  cpu_millis=cpu_share_millis(group, model.gpus_per_pod, allowance),
                                  memory_mib=math.ceil(model.memory_request_gib * 1024),
                                  ephemeral_storage_gib=hf_cache_gib(model) + 1)
    inits = ((STAGED_WAIT_INIT,) if staged(model) else ()) + ((DOWNLOAD_INIT,) if downloads_from_hub(model) else ())
    return PodPlan(containers=inits + (main,))


def with_pods(plan: FleetPlan, allowance: DaemonSetAllowance) -> FleetPlan:
    """Every workload with its pod's containers (the node groups' allocatable must be known)."""
    groups = {g.name: g for g in plan.node_groups}
    servers = tuple(s.model_copy(update={"pod": triton_pod(s, plan, groups[s.node_group], allowance)})
                    for s in plan.triton_servers)
    models = tuple(m.model_copy(update={"pod": vllm_pod(m, groups[m.node_group], allowance)})
                   if isinstance(m, VllmModelPlan) else m for m in plan.models)
    return plan.model_copy(update={"triton_servers": servers, "models": models})
