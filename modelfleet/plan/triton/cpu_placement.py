"""Classic models on CPU nodes: KIND_CPU Triton servers, and the CPU instance type they run on.

A CPU server replica is one pod holding a whole node of its CPU node group (one pod slot per node): the
node's cores are split between the server's models as KIND_CPU instances, each instance keeping its measured
``vcpu_per_instance`` busy (its backend's thread count is set to that: render/triton.py). Per server, on an
instance type T:

    cores U          the node's allocatable CPU (hardware/kubelet.py), less the DaemonSet allowance and Triton's own
                     0.5 core (HTTP/gRPC front ends, the batcher), rounded down to whole vCPUs
    load d_m         instances model m's peak keeps busy at the target utilisation: peak_rps / (rps x target)
    floor c0_m       instances a replica runs whatever the load: 1, the override, or a stateful model's slots
    replicas R       the fewest replicas, at least every member's availability floor, such that
                     sum over m of max(c0_m, ceil(d_m / R)) x vcpu_m <= U, and those instances' host RAM (below)
                     fits the pod's share of the node: more replicas, fewer instances each, less RAM each
    instances c_m    max(c0_m, ceil(d_m / R)); the cores left over then become more instances (the busiest
                     model per instance first, while its RAM fits): the node is paid for, and idle cores are
                     headroom for bursts and a shorter queue
    host RAM         Triton's base, every instance's footprint, the load-time copies of the largest models and
                     the python stubs' arenas, within the pod's share of the node (as on a GPU node)

Models of one pool share one server per instance type (``triton-<pool>``; the default pool is named after the
instance type, ``triton-c7i-xlarge``, as GPU servers are); a pipeline's steps are in one pool (spec), so its
ensemble runs in that server. The cheapest allowed CPU type wins: R x its node-hour at the stack's capacity
type with its root volume (hardware/node_price.py, the GPU packing's ranking). Nothing is packed with GPU servers.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from ...spec.environment import EnvironmentSpec
from ...spec.models import ClassicModelSpec
from ...spec.pipelines import PipelineSpec
from ...spec.units import GIB
from .cpu_sizing import MAX_CPU_INSTANCES, CpuFigures, cpu_figures, cpu_sizing, instances_for_load, min_instances
from ..capacity.pod_resources import set_aside
from ..hardware.instances import CpuInstanceType, InstanceCatalogue
from ..hardware.kubelet import kube_reserved_cpu_millis, memory_allocatable_mib
from ..rejection import Rejection
from ..names import triton_server_name
from ..sizing import on_demand_replicas, spreads_over_zones
from ..hardware.node_price import ranking_usd_per_hour
from .packing.gpu import (
    MIN_CACHE_BYTES,
    PYTHON_SHM_BYTES,
    SYSTEM_RESERVE_FRACTION,
    SYSTEM_RESERVE_GIB,
    TRITON_HOST_BASE_GIB,
    replicas_asked,
)
from .pipelines import StepBudget, effective_spec, split_budget
from .policy import ClassicSizing, within_budget

TRITON_CPU_OVERHEAD_CORES = 0.5  # Triton's HTTP/gRPC front ends, the dynamic batcher and the metrics thread


@dataclass(kw_only=True, frozen=True)
class CpuServer:
    name: str
    models: tuple[str, ...]
    counts: Mapping[str, int]  # KIND_CPU instances per replica
    min_replicas: int
    replicas: int
    max_replicas: int
    spread_zones: bool
    cores: int  # U: the vCPUs its instances may keep busy
    memory_request_gib: float
    cache_size_bytes: int
    python_shm_bytes: int


@dataclass(kw_only=True, frozen=True)
class CpuPlacement:
    instance: CpuInstanceType
    servers: tuple[CpuServer, ...]
    figures: dict[str, CpuFigures]
    sizings: dict[str, ClassicSizing]  # with the placement's instance counts
    specs: dict[str, ClassicModelSpec]  # as served: with their pipelines' load and p99 shares
    budgets: dict[str, tuple[StepBudget, ...]]
    nodes: tuple[int, int, int]  # min, desired, max (one server pod per node)
    usd_per_hour: float


def usable_cores(instance: CpuInstanceType, env: EnvironmentSpec) -> int:
    """Whole vCPUs a server pod's instances may keep busy on one node (a caller proxy's share set aside)."""
    allocatable = (instance.vcpu * 1000 - kube_reserved_cpu_millis(instance.vcpu)) / 1000
    kept = env.deploy.daemonset_allowance.for_node(instance.vcpu, 0).cpu
    assert kept is not None  # for_node resolves the default
    return math.floor(allocatable - kept - TRITON_CPU_OVERHEAD_CORES - set_aside(env.callers)[0])


def pod_ram_gib(instance: CpuInstanceType, env: EnvironmentSpec) -> float:
    """Host RAM the node's server pod may request: the node less the system reserve, and never more than what
    the kubelet offers beside the DaemonSet allowance (packing.server_ram_gib's rule for a whole node)."""
    kept = env.deploy.daemonset_allowance.for_node(instance.vcpu, 0).memory_gib
    assert kept is not None  # for_node resolves the default
    kubelet = memory_allocatable_mib(instance) / 1024 - kept  # type: ignore[arg-type]
    return (min(instance.ram_gib - SYSTEM_RESERVE_GIB - SYSTEM_RESERVE_FRACTION * instance.ram_gib, kubelet)
            - set_aside(env.callers)[1])


def _host_gib(counts: Mapping[str, int], specs: Mapping[str, ClassicModelSpec],
              sizings: Mapping[str, ClassicSizing]) -> tuple[float, int]:
    """(host GiB without the cache, python shared-memory bytes) of a server replica with ``counts``."""
    resident = sum(sizings[n].host_gib / sizings[n].instance_count * c for n, c in counts.items())
    loading = sum(sorted((sizings[n].weights_gib for n in counts), reverse=True)[:4])
    shm = sum(PYTHON_SHM_BYTES * c for n, c in counts.items() if specs[n].framework == "python")
    return TRITON_HOST_BASE_GIB + resident + loading + shm / GIB, shm


def _request_gib(host: float, cache_bytes: int) -> float:
    """The server pod's memory request (``CpuServer.memory_request_gib``, which the pod renders and the fit
    check counts): its host RAM and its response cache."""
    return round(host + cache_bytes / GIB, 2)


def _ram_fits(counts: Mapping[str, int], specs: Mapping[str, ClassicModelSpec],
              sizings: Mapping[str, ClassicSizing], room_gib: float) -> bool:
    """Whether a replica running ``counts`` instances (and no cache) requests no more than ``room_gib``."""
    return _request_gib(_host_gib(counts, specs, sizings)[0], 0) <= room_gib


def _replicas(members: list[ClassicModelSpec], figures: Mapping[str, CpuFigures], env: EnvironmentSpec,
              cores: int, room_gib: float, sized: Mapping[str, ClassicSizing]) -> int:
    """The fewest replicas (at least the members' need) whose per-replica instances fit ``cores`` and whose
    host RAM fits ``room_gib`` (the load's instances were sized by cores alone: a 2-vCPU c7i.xlarge pod ran
    two 2 GiB instances in its 5.43 GiB, 7 GiB with Triton's base and a load-time copy, and the fit check
    refused the plan)."""
    need = max(replicas_asked(m, env)[0] for m in members)
    if env.replicas.single_replica:
        return 1
    util = env.triton.target_utilization
    specs = {m.name: m for m in members}

    def fits(replicas: int) -> bool:
        counts = {m.name: max(min_instances(m, figures[m.name]),
                              math.ceil(instances_for_load(m, figures[m.name], util) / replicas - 1e-9))
                  for m in members}
        return (sum(c * figures[n].vcpu_per_instance for n, c in counts.items()) <= cores
                and _ram_fits(counts, specs, sized, room_gib))

    low, high = need, max(need, math.ceil(max(instances_for_load(m, figures[m.name], util) for m in members)))
    while low < high:  # fits() only grows with the replicas, and holds at ``high`` (the floors: _server checked them)
        middle = (low + high) // 2
        low, high = (low, middle) if fits(middle) else (middle + 1, high)
    return low


def _counts(members: list[ClassicModelSpec], figures: Mapping[str, CpuFigures], replicas: int, cores: int,
            room_gib: float, sized: Mapping[str, ClassicSizing], specs: Mapping[str, ClassicModelSpec],
            env: EnvironmentSpec) -> dict[str, int]:
    """Instances per replica: what the load and the floors ask, then the spare cores as more instances. A
    single-replica environment starts from the floors: its one replica may not hold the load (the plan warns)."""
    util = env.triton.target_utilization
    load = {m.name: instances_for_load(m, figures[m.name], util) for m in members}
    counts = {m.name: min(MAX_CPU_INSTANCES, max(min_instances(m, figures[m.name]), 0 if env.replicas.single_replica
                                                 else math.ceil(load[m.name] / replicas - 1e-9))) for m in members}
    while True:
        spare = cores - sum(c * figures[n].vcpu_per_instance for n, c in counts.items())
        grow = [n for n, c in counts.items() if figures[n].vcpu_per_instance <= spare and c < MAX_CPU_INSTANCES
                and _ram_fits({**counts, n: c + 1}, specs, sized, room_gib)]
        if not grow:
            return counts
        busiest = min(grow, key=lambda n: (-load[n] / counts[n], n))
        counts[busiest] += 1


def _server(name: str, members: list[ClassicModelSpec], figures: Mapping[str, CpuFigures], env: EnvironmentSpec,
            instance: CpuInstanceType) -> CpuServer | Rejection:
    names = sorted(m.name for m in members)
    cores, room = usable_cores(instance, env), pod_ram_gib(instance, env)
    floors = {m.name: min_instances(m, figures[m.name]) for m in members}
    least = sum(floors[n] * figures[n].vcpu_per_instance for n in names)
    if least > cores:
        who = f"{names[0]} needs" if len(names) == 1 else f"{', '.join(names)} need"
        return Rejection(instance.name, f"{who} {least} vCPU(s) per replica for the fewest instances, more than "
                                        f"the {cores} a {instance.name} server pod has")
    specs = {m.name: m for m in members}
    one = {m.name: cpu_sizing(m, figures[m.name], 1, 1, env.triton.target_utilization) for m in members}
    if not _ram_fits(floors, specs, one, room):
        return Rejection(instance.name, f"{', '.join(names)} need {_host_gib(floors, specs, one)[0]:.1f} GiB of host "
                                        f"RAM, more than the {room:.1f} GiB a {instance.name} server pod gets")
    replicas = _replicas(members, figures, env, cores, room, one)
    counts = _counts(members, figures, replicas, cores, room, one, specs, env)
    host, shm = _host_gib(counts, specs, one)
    assert _ram_fits(counts, specs, one, room), (name, counts)  # _replicas held the load's instances to the room
    cache = int((room - host) * env.triton.cache_ram_fraction * GIB) // 1024**2 * 1024**2
    cache = cache if cache >= MIN_CACHE_BYTES else 0
    floor = min(max(replicas_asked(m, env)[1] for m in members), replicas)
    top = replicas if env.replicas.single_replica else max(replicas, math.ceil(replicas * env.replicas.max_scale_factor))
    return CpuServer(name=name, models=tuple(names), counts=counts, min_replicas=floor, replicas=replicas,
                     max_replicas=top, spread_zones=spreads_over_zones(floor), cores=cores,
                     memory_request_gib=_request_gib(host, cache), cache_size_bytes=cache, python_shm_bytes=shm)


def _figures(models: list[ClassicModelSpec], pipelines: list[PipelineSpec], instance: CpuInstanceType,
             catalogue: InstanceCatalogue) -> tuple[dict, dict, dict] | Rejection:
    """(figures, served specs, budgets) on the type's processor: each model's at its own SLA, the pipelines'
    p99 split in proportion to them (plan/triton/pipelines.py), the steps' figures again at their shares."""
    own = {}
    for model in models:
        figures = cpu_figures(model, instance.processor, catalogue)
        if isinstance(figures, str):
            return Rejection(instance.name, f"{model.name}: {figures}")
        own[model.name] = figures
    budgets = {p.name: split_budget(p, own) for p in pipelines}  # type: ignore[arg-type]
    specs = {m.name: effective_spec(m, pipelines, budgets) for m in models}
    served = {n: own[n] if specs[n] is m else cpu_figures(specs[n], instance.processor, catalogue)
              for n, m in ((m.name, m) for m in models)}
    return served, specs, budgets  # type: ignore[return-value]


def place_on_cpu(models: list[ClassicModelSpec], pipelines: list[PipelineSpec], env: EnvironmentSpec,
                 catalogue: InstanceCatalogue, instance: CpuInstanceType) -> CpuPlacement | Rejection:
    """Every CPU model on servers of ``instance``; a Rejection says which model does not fit, and why."""
    figured = _figures(models, pipelines, instance, catalogue)
    if isinstance(figured, Rejection):
        return figured
    figures, specs, budgets = figured
    util = env.triton.target_utilization
    for name, spec in sorted(specs.items()):
        if not within_budget(spec, cpu_sizing(spec, figures[name], 1, 1, util)):
            return Rejection(instance.name, f"{name}: a full batch takes {figures[name].compute_ms:g} ms on a "
                                            f"{instance.processor.code_name}, leaving no queueing budget in its p99")
    pools: dict[str, list[ClassicModelSpec]] = {}
    for name, spec in sorted(specs.items()):
        pools.setdefault(spec.pool or instance.name.replace(".", "-"), []).append(spec)
    servers = [_server(triton_server_name(pool), members, figures, env, instance) for pool, members in sorted(pools.items())]
    rejected = next((s for s in servers if isinstance(s, Rejection)), None)
    if rejected is not None:
        return rejected
    placed = tuple(s for s in servers if isinstance(s, CpuServer))
    sizings = {n: cpu_sizing(specs[n], figures[n], s.counts[n], s.replicas, util) for s in placed for n in s.models}
    nodes = tuple(sum(getattr(s, level) for s in placed) for level in ("min_replicas", "replicas", "max_replicas"))
    # one pod per node: a spot stack's floors of two or more (sizing.on_demand_replicas) on on-demand nodes, as
    # capacity/provisioning.py provisions them and the cost preview charges them
    base = sum(on_demand_replicas(env, s.min_replicas) for s in placed)
    price = ranking_usd_per_hour(catalogue, instance, env, nodes[1], on_demand_base=base)  # type: ignore[arg-type]
    return CpuPlacement(instance=instance, servers=placed, figures=figures, sizings=sizings, specs=specs,
                        budgets=budgets, nodes=nodes, usd_per_hour=price)  # type: ignore[arg-type]


def cpu_placements(models: list[ClassicModelSpec], pipelines: list[PipelineSpec], env: EnvironmentSpec,
                   catalogue: InstanceCatalogue) -> tuple[list[CpuPlacement], list[Rejection]]:
    """Every allowed CPU type's placement, cheapest first (then fewer vCPUs, then the name), and the types
    that cannot host them, with why."""
    results = [place_on_cpu(models, pipelines, env, catalogue, i) for i in catalogue.cpu_in_families(env.instance_families)]
    fits = sorted((r for r in results if isinstance(r, CpuPlacement)),
                  key=lambda p: (p.usd_per_hour, p.instance.vcpu, p.instance.name))
    return fits, [r for r in results if isinstance(r, Rejection)]
