"""Packing classic models onto shared Triton GPUs, and choosing the GPU instance type they run on.

Each Triton server replica is one pod on one GPU. A model whose peak load needs more than one GPU of
compute (or that asks for ``dedicated_gpu``) gets its own server, replicated for load. Every other model
is packed onto shared servers (triton/packing/binpacking.py: GPU memory and host RAM bound a server; its compute sets its
replicas): that is Triton's strength, many small models on one GPU with one response cache.

Server names say what a server is, never which model happened to come first. Classic models may declare a
``pool`` (models of different pools never share a server); the rest form the default pool, named after the
instance type they run on. A pool's servers are named:

    triton-<pool>            its first shared server (the one whose first member in the packing order, its
                             *anchor*, comes first: the most replicas needed, then the largest GPU share,
                             then the name)
    triton-<pool>-<anchor>   any further shared server of the pool
    triton-<pool>-<model>    a server of one model that needs a GPU of its own (its load, or ``dedicated_gpu``)

e.g. ``triton-g5-xlarge`` holds the example's four image and text models. Adding a model may re-pack: a
dedicated model never renames another server; a shared one renames a server only when it opens a new shared
server whose anchor outranks the pool's first (which then takes the pool's name), and models moving between
the further servers rename them as their anchors change. Servers were named ``triton-<anchor>`` before;
that name is kept as ``former_name``, so a deployed stack's resources are carried over (Pulumi aliases).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ....spec.environment import EnvironmentSpec
from ....spec.models import ClassicModelSpec
from ....spec.pipelines import PipelineSpec
from ....spec.units import GIB
from .binpacking import Item, Objective, pack_optimally
from ...hardware.instances import InstanceCatalogue, InstanceType
from ...capacity.pod_resources import set_aside
from ...hardware.kubelet import memory_share_gib
from ...rejection import Rejection
from ...names import stable_name, triton_server_name
from ...capacity.reservations import reserved_count
from ...hardware.node_price import ranking_usd_per_hour, ranking_usd_per_node_hour
from ..pipelines import PipelineSizing, StepBudget, size_on, together
from ...sizing import (TRITON_GPU_OVERHEAD_GIB, nodes_for_pods, on_demand_replicas, replica_floor,
                       spreads_over_zones)
from ..built_for import pool_suffix, wrong_gpu
from ..policy import ClassicSizing, within_budget

# Host RAM kept for the kubelet, the OS and daemonsets: 1.5 GiB plus 10% of the node's RAM share.
SYSTEM_RESERVE_GIB = 1.5
SYSTEM_RESERVE_FRACTION = 0.10
# Triton's own host memory. On top: python-backend models' resident weights, and a transient host copy of
# the weights of the models loading at once (tritonserver's --model-load-thread-count, default 4).
TRITON_HOST_BASE_GIB = 1.0
MODEL_LOAD_THREADS = 4
MIN_CACHE_BYTES = 64 * 1024**2  # below this a cache is not worth its lookups
PYTHON_SHM_BYTES = 64 * 1024**2  # python backend shared-memory arena per model instance


@dataclass(kw_only=True, frozen=True)
class PackedServer:
    name: str
    former_name: str  # the name under the old scheme, triton-<anchor> (for the aliases of deployed stacks)
    models: tuple[str, ...]
    min_replicas: int
    replicas: int
    max_replicas: int
    spread_zones: bool
    gpu_memory_used_gib: float
    gpu_compute_used: float
    cache_size_bytes: int
    memory_request_gib: float
    python_shm_bytes: int


@dataclass(kw_only=True, frozen=True)
class ClassicPlacement:
    instance: InstanceType
    servers: tuple[PackedServer, ...]
    sizings: dict[str, ClassicSizing]
    nodes: tuple[int, int, int]  # min, desired, max
    usd_per_hour: float  # what the servers add to the node group (see pack_on)
    standalone_usd_per_hour: float  # their own nodes' price, were the group theirs alone
    specs: dict[str, ClassicModelSpec]  # as served: with their pipelines' load and p99 shares
    budgets: dict[str, tuple[StepBudget, ...]]  # pipeline -> its steps' shares of its p99


def _share(sizing: ClassicSizing, capacity_gib: float) -> float:
    return max(sizing.gpu_memory_gib / capacity_gib, sizing.gpu_demand)


def server_ram_gib(instance: InstanceType, env: EnvironmentSpec) -> float:
    """Host RAM one GPU's Triton pod may request: its share of the node less the system reserve, and never more
    than its share of what the kubelet offers beside the DaemonSet allowance (plan/hardware/kubelet.py: a 16 GiB node
    offers 12.8 GiB to pods, less than the reserve alone leaves), less what a caller proxy beside it requests."""
    ram_share = instance.ram_gib / instance.gpus
    kubelet = memory_share_gib(instance, env.deploy.ami_type, env.deploy.daemonset_allowance, 1)
    return (min(ram_share - SYSTEM_RESERVE_GIB - SYSTEM_RESERVE_FRACTION * ram_share, kubelet)
            - set_aside(env.callers)[1])


def host_capacity_gib(instance: InstanceType, env: EnvironmentSpec) -> float:
    """Host RAM one GPU's Triton server may hold weights in: ``server_ram_gib`` less Triton's own base. A
    packing constraint, so a full server opens another rather than disqualifying the instance type (which
    made adding a model able to *lower* the cost)."""
    return server_ram_gib(instance, env) - TRITON_HOST_BASE_GIB


def _need(model: ClassicModelSpec, env: EnvironmentSpec) -> int:
    """Replicas a model asks of any server it is on: its pin, else its availability floor."""
    return 1 if env.replicas.single_replica else model.overrides.replicas or _floor(model, env)


def _floor(model: ClassicModelSpec, env: EnvironmentSpec) -> int:
    """Replicas a model's availability alone asks (sizing.replica_floor)."""
    return replica_floor(env, model.sla.availability)


def replicas_asked(model: ClassicModelSpec, env: EnvironmentSpec) -> tuple[int, int]:
    """(need, floor): the replicas a model asks of any server it is on, and its availability floor alone."""
    return _need(model, env), _floor(model, env)


@dataclass(frozen=True)
class Asks:
    """What each model asks of a server on one GPU type: its packing rank (packing_rank), need and availability
    floor, worked out once per packing rather than in every sort and server (78,000 times at 1,000 models)."""

    rank: dict[str, tuple[int, float, str]]
    need: dict[str, int]
    floor: dict[str, int]

    @classmethod
    def of(cls, models: list[ClassicModelSpec], sizings: dict[str, ClassicSizing], capacity: float,
           env: EnvironmentSpec) -> Asks:
        rank = {m.name: packing_rank(m, sizings, capacity, env) for m in models}
        return cls(rank, {name: -r[0] for name, r in rank.items()}, {m.name: _floor(m, env) for m in models})


def pack_bins(units: list[list[ClassicModelSpec]], sizings: dict[str, ClassicSizing], asks: Asks, capacity: float,
          host_capacity: float, objective: Objective) -> list[list[str]]:
    """Shared servers, packed optimally (binpacking.py: GPU memory and host RAM bound a server, its compute sets
    its replicas). A unit is one model, or a pipeline's steps (they share a server), packed as one item
    (unit_items). Units needing more replicas come first, so they share servers among themselves and units
    needing fewer fill the room left (riding along costs no GPU)."""
    items = unit_items(sorted(units, key=lambda u: asks.rank[u[0].name]), sizings, asks)
    members = {u[0].name: [m.name for m in u] for u in units}
    # Compute per replica is one GPU: the sizings already hold it to the environment's target utilisation.
    return [sorted(n for anchor in names for n in members[anchor])
            for names in pack_optimally(items, (capacity, 1.0, host_room(units, sizings, host_capacity)), objective)]


def unit_items(units: list[list[ClassicModelSpec]], sizings: dict[str, ClassicSizing], asks: Asks) -> list[Item]:
    """Each unit as the packing's item, in the given order: named after its anchor, its members' sizes summed."""
    return [Item(u[0].name, (sum(sizings[m.name].gpu_memory_gib for m in u), sum(sizings[m.name].gpu_demand for m in u),
                             sum(sizings[m.name].host_gib for m in u)),
                 max(asks.need[m.name] for m in u), max(asks.floor[m.name] for m in u)) for u in units]


def host_room(units: list[list[ClassicModelSpec]], sizings: dict[str, ClassicSizing], host_capacity: float) -> float:
    """Host RAM a shared server may fill: room for the load-time copies of the largest models kept on each."""
    return host_capacity - loading_gib([m.name for u in units for m in u], sizings)


def _units(models: list[ClassicModelSpec], together: tuple[tuple[str, ...], ...],
           asks: Asks) -> list[list[ClassicModelSpec]]:
    """The models as packing units: each group of ``together`` present here is one, every other model its
    own; each unit's members in packing order (the first is its anchor)."""
    by_name = {m.name: m for m in models}
    grouped = [[by_name[n] for n in group if n in by_name] for group in together]
    grouped = [g for g in grouped if g]
    inside = {m.name for g in grouped for m in g}
    units = grouped + [[m] for m in models if m.name not in inside]
    return [sorted(u, key=lambda m: asks.rank[m.name]) for u in units]


def packing_rank(model: ClassicModelSpec, sizings: dict[str, ClassicSizing], capacity: float,
                 env: EnvironmentSpec) -> tuple[int, float, str]:
    """The packing order: most replicas needed, then the largest GPU share, then the name. The first of a
    server's members in this order anchors (names) it."""
    return -_need(model, env), -_share(sizings[model.name], capacity), model.name


def loading_gib(names: list[str], sizings: dict[str, ClassicSizing]) -> float:
    """Host RAM for the transient copies of the weights of the models that load at once (the largest)."""
    return sum(sorted((sizings[n].weights_gib for n in names), reverse=True)[:MODEL_LOAD_THREADS])


def server_replicas(members: list[ClassicModelSpec], sizings: dict[str, ClassicSizing], asks: Asks,
              env: EnvironmentSpec) -> tuple[int, int, int]:
    """(min, desired, max) server replicas: enough for every member. A pinned ``overrides.replicas`` decides
    its own model's need only; it never cuts the replicas a neighbour's availability or load requires."""
    policy = env.replicas
    if policy.single_replica:
        return 1, 1, 1
    # Load counts for every shared server (binpacking.replicas); only a server of one pinned model runs
    # exactly its pin.
    pinned_alone = len(members) == 1 and members[0].overrides.replicas
    load = 0 if pinned_alone else math.ceil(sum(sizings[m.name].gpu_demand for m in members) - 1e-9)
    desired = max(*(asks.need[m.name] for m in members), load)
    lowest = min(max(asks.floor[m.name] for m in members), desired)
    return lowest, desired, max(desired, math.ceil(desired * policy.max_scale_factor))


def packed_server(members: list[ClassicModelSpec], sizings: dict[str, ClassicSizing], asks: Asks, env: EnvironmentSpec,
            instance: InstanceType, name: str, ram_gib: float | None = None) -> PackedServer | Rejection:
    """One server of ``members``, or a Rejection: more host RAM than ``ram_gib`` (server_ram_gib) needed."""
    ram_gib = server_ram_gib(instance, env) if ram_gib is None else ram_gib
    names = sorted(m.name for m in members)
    anchor = min(members, key=lambda m: asks.rank[m.name])
    lo, desired, hi = server_replicas(members, sizings, asks, env)
    host = TRITON_HOST_BASE_GIB + sum(sizings[n].host_gib for n in names) + loading_gib(names, sizings)
    shm = sum(PYTHON_SHM_BYTES * sizings[m.name].instance_count for m in members if m.framework == "python")
    spare = ram_gib - host - shm / GIB
    if spare < 0:
        return Rejection(instance.name, f"{', '.join(names)} need {host + shm / GIB:.1f} GiB of host RAM, more than "
                                        f"the {ram_gib:.1f} GiB a pod gets per GPU there")
    cache = int(spare * env.triton.cache_ram_fraction * GIB) // (1024**2) * (1024**2)
    cache = cache if cache >= MIN_CACHE_BYTES else 0
    return PackedServer(
        name=name, former_name=stable_name("triton", anchor.name), models=tuple(names), min_replicas=lo, replicas=desired,
        max_replicas=hi, spread_zones=spreads_over_zones(lo),
        gpu_memory_used_gib=round(TRITON_GPU_OVERHEAD_GIB + sum(sizings[n].gpu_memory_gib for n in names), 3),
        gpu_compute_used=round(sum(sizings[n].gpu_demand for n in names), 4) / max(desired, 1),
        cache_size_bytes=cache, memory_request_gib=round(host + cache / GIB + shm / GIB, 2), python_shm_bytes=shm)


def pack_on(models: list[ClassicModelSpec], env: EnvironmentSpec, catalogue: InstanceCatalogue,
            instance: InstanceType, in_use: tuple[int, int] = (0, 0),
            sizing_cache: dict[str, PipelineSizing] | None = None, pipelines: tuple[PipelineSpec, ...] = (),
            keep_together: bool = True) -> ClassicPlacement | Rejection:
    """Pack every classic model onto GPUs of ``instance``; a Rejection says which model does not fit.

    ``in_use``: GPUs other workloads (LLMs) hold on this instance type and the zone spread they force. The
    packing minimises, and ``usd_per_hour`` is, what the servers add to that node group: choosing by the
    standalone cost instead would ignore idle GPUs, and adding a model could then lower the cost.
    ``pipelines``: their steps' load and p99 shares (plan/triton/pipelines.py), and their steps kept on one server
    (unless ``keep_together`` is false: the plan prices what the constraint costs that way)."""
    checked = checked_on(models, env, catalogue, instance, sizing_cache, pipelines)
    if isinstance(checked, Rejection):
        return checked
    return pack_checked(models, checked, env, catalogue, instance, in_use, pipelines, keep_together)


def pack_checked(models: list[ClassicModelSpec], checked: tuple[PipelineSizing, Asks], env: EnvironmentSpec,
                 catalogue: InstanceCatalogue, instance: InstanceType, in_use: tuple[int, int] = (0, 0),
                 pipelines: tuple[PipelineSpec, ...] = (), keep_together: bool = True) -> ClassicPlacement | Rejection:
    """``pack_on`` for models ``checked_on`` has sized on ``instance``."""
    sized, asks = checked
    servers: list[PackedServer] = []
    groups = together(list(pipelines)) if keep_together else ()
    for pool, members in pools(models, instance):
        packed = _pack_pool(pool, members, sized.sizings, asks, env, instance, in_use, servers, groups)
        if isinstance(packed, Rejection):
            return packed
        servers += packed
    return placement_of(servers, sized, env, catalogue, instance, in_use)


def checked_on(models: list[ClassicModelSpec], env: EnvironmentSpec, catalogue: InstanceCatalogue,
               instance: InstanceType, sizing_cache: dict[str, PipelineSizing] | None = None,
               pipelines: tuple[PipelineSpec, ...] = ()) -> tuple[PipelineSizing, Asks] | Rejection:
    """The models sized on ``instance``'s GPU, and what each asks of a server; a Rejection names the first
    model too large for its GPU or too slow for its p99 there (or built for another GPU)."""
    wrong = wrong_gpu(models, instance)
    if wrong is not None:
        return wrong
    capacity = capacity_of(instance)
    cache = sizing_cache if sizing_cache is not None else {}
    if instance.gpu.key not in cache:  # sizing depends on the GPU model only, not on the instance size
        cache[instance.gpu.key] = size_on(models, list(pipelines), instance.gpu, catalogue,
                                          env.triton.target_utilization)
    sized = cache[instance.gpu.key]
    sizings, specs = sized.sizings, sized.specs
    too_big = sorted(n for n, s in sizings.items() if s.gpu_memory_gib > capacity)
    if too_big:
        return Rejection(instance.name, f"{too_big[0]} needs {sizings[too_big[0]].gpu_memory_gib:.1f} GiB, "
                                        f"more than the {capacity:.1f} GiB a {instance.gpu.name} has free")
    too_slow = sorted(m.name for m in models if not within_budget(specs[m.name], sizings[m.name]))
    if too_slow:
        slow = sizings[too_slow[0]]
        why = ("leaving no queueing budget in its p99" if slow.queue_timeout_us <= 0 else
               "which with its queue overrides exceeds its p99")
        return Rejection(instance.name, f"{too_slow[0]}: a full batch takes {slow.compute_ms:.1f} ms on a "
                                        f"{instance.gpu.name}, {why}")
    return sized, Asks.of(models, sizings, capacity, env)


def placement_of(servers: list[PackedServer], sized: PipelineSizing, env: EnvironmentSpec,
                 catalogue: InstanceCatalogue, instance: InstanceType, in_use: tuple[int, int]) -> ClassicPlacement:
    """The servers on ``instance`` with the nodes they take and what they add to its node group."""
    servers = sorted(servers, key=lambda s: s.name)
    nodes = tuple(_nodes([getattr(s, attr) for s in servers], servers, instance)
                  for attr in ("min_replicas", "replicas", "max_replicas"))
    added, standalone = placement_usd(catalogue, env, instance, servers, in_use, nodes[1])
    return ClassicPlacement(instance=instance, servers=tuple(servers), sizings=sized.sizings, nodes=nodes,
                            usd_per_hour=added, standalone_usd_per_hour=standalone, specs=sized.specs,
                            budgets=sized.budgets)


def placement_usd(catalogue: InstanceCatalogue, env: EnvironmentSpec, instance: InstanceType,
                  servers: list[PackedServer], in_use: tuple[int, int], desired_nodes: int) -> tuple[float, float]:
    """(what the servers add to their node group's hour, their own nodes' hour) at the ranking price, as the
    cost preview charges a group (hardware/node_price.py). On a type the stack has reserved, the reserved nodes'
    instance-hours are paid already: the group's other workloads (the LLMs, placed first) take them first and
    the servers pay only for the nodes beyond, so a reserved type is used before any other (the LLM search
    prices its layouts the same way, llm/search.py ``nodes_usd``). On a spot stack, the nodes that hold the
    servers' availability floors (``on_demand_base_nodes``) are priced on-demand, as capacity/provisioning.py
    provisions them."""
    reserved = reserved_count(env, instance.name)
    added = _nodes_added(servers, in_use, instance)
    base = on_demand_base_nodes(env, servers, instance)
    if not reserved and not base:
        price = ranking_usd_per_node_hour(catalogue, instance, env)
        return added * price, desired_nodes * price
    before = Objective(instance.gpus).score(*in_use)[0]
    total = ranking_usd_per_hour(catalogue, instance, env, before + added, reserved=reserved, on_demand_base=base)
    return (total - ranking_usd_per_hour(catalogue, instance, env, before, reserved=reserved),
            ranking_usd_per_hour(catalogue, instance, env, desired_nodes, reserved=reserved, on_demand_base=base))


def on_demand_base_nodes(env: EnvironmentSpec, servers: list[PackedServer], instance: InstanceType) -> int:
    """Nodes the servers' on-demand replicas fill (sizing.on_demand_replicas: a spot stack's floors of two or
    more), one GPU per Triton pod, as capacity/provisioning.py ``base_nodes`` counts a group's."""
    pods = sum(on_demand_replicas(env, s.min_replicas) for s in servers)
    return nodes_for_pods({1: pods}, instance.gpus) if pods else 0


def default_pool(instance: InstanceType) -> str:
    """The pool of models that declare none: the instance type they run on (``g5.xlarge`` -> ``g5-xlarge``)."""
    return instance.name.replace(".", "-")


def pools(models: list[ClassicModelSpec], instance: InstanceType) -> list[tuple[str, list[ClassicModelSpec]]]:
    """Models by pool, pools in name order; a declared pool equal to the default one is the default pool. The
    default pool is split by TensorRT version (plan/triton/built_for.py: a server runs one)."""
    pools: dict[str, list[ClassicModelSpec]] = {}
    for model in models:
        pools.setdefault(pool_of(model, instance), []).append(model)
    return sorted(pools.items())


def pool_of(model: ClassicModelSpec, instance: InstanceType) -> str:
    """The model's declared pool, else the default one (split by TensorRT version)."""
    return model.pool or default_pool(instance) + pool_suffix(model)


def _pack_pool(pool: str, models: list[ClassicModelSpec], sizings: dict[str, ClassicSizing], asks: Asks,
               env: EnvironmentSpec, instance: InstanceType, in_use: tuple[int, int],
               placed: list[PackedServer], together: tuple[tuple[str, ...], ...] = ()) -> list[PackedServer] | Rejection:
    """One pool's servers: a server per unit (a model, or a pipeline's steps) with a member that needs a GPU
    of its own, the others packed together; the packing counts the GPUs other pools and workloads already hold on this
    instance type (``placed``, ``in_use``). Named as the module docstring says."""
    alone, shared = split_units(models, sizings, asks, together)
    groups = [(u, triton_server_name(pool, u[0].name)) for u in alone]
    ram = server_ram_gib(instance, env)
    own = [packed_server(g, sizings, asks, env, instance, n, ram) for g, n in groups]  # the servers of one unit each
    held = placed + [s for s in own if isinstance(s, PackedServer)]
    objective = Objective(instance.gpus, in_use[0] + sum(s.replicas for s in held),
                          max([in_use[1]] + [s.min_replicas for s in held if s.spread_zones]),
                          1 if env.replicas.single_replica else math.inf)
    by_name = {m.name: m for u in shared for m in u}
    bins = sorted(pack_bins(shared, sizings, asks, capacity_of(instance), host_capacity_gib(instance, env), objective),
                  key=lambda names: min(asks.rank[n] for n in names))
    for index, names in enumerate(bins):
        anchor = min(names, key=lambda n: asks.rank[n])
        groups.append(([by_name[n] for n in names], triton_server_name(pool) if index == 0 else
                       triton_server_name(pool, anchor)))
    servers = own + [packed_server(ms, sizings, asks, env, instance, name, ram) for ms, name in groups[len(own):]]
    rejected = next((s for s in servers if isinstance(s, Rejection)), None)
    return rejected or servers  # type: ignore[return-value]


def split_units(models: list[ClassicModelSpec], sizings: dict[str, ClassicSizing], asks: Asks,
                together: tuple[tuple[str, ...], ...] = ()) -> tuple[list[list[ClassicModelSpec]], list[list[ClassicModelSpec]]]:
    """(units that go alone, units packed together) of one pool. A unit with a member that needs a GPU of its
    own goes alone (all of a pipeline's steps with it); a unit of small models is packed like one, however much
    compute it sums to (the packing sets its replicas)."""
    units = _units(models, together, asks)
    alone = [u for u in units if any(sizings[m.name].gpu_demand > 1.0 or m.overrides.dedicated_gpu for m in u)]
    apart = {id(u) for u in alone}
    return alone, [u for u in units if id(u) not in apart]


def capacity_of(instance: InstanceType) -> float:
    """GPU memory one Triton server may fill: the GPU's usable memory less Triton's own overhead."""
    return instance.gpu_memory_gib - TRITON_GPU_OVERHEAD_GIB


def _nodes_added(servers: list[PackedServer], in_use: tuple[int, int], instance: InstanceType) -> int:
    """Desired nodes the servers add to a node group whose other workloads hold ``in_use``."""
    together = Objective(instance.gpus).score(in_use[0] + sum(s.replicas for s in servers),
                                              max([in_use[1]] + [s.min_replicas for s in servers if s.spread_zones]))
    return together[0] - Objective(instance.gpus).score(*in_use)[0]


def _nodes(replicas: list[int], servers: list[PackedServer], instance: InstanceType) -> int:
    pods = sum(replicas)  # every Triton pod takes one GPU
    spread = max((r for r, s in zip(replicas, servers) if s.spread_zones), default=1)
    return max(nodes_for_pods({1: pods}, instance.gpus), spread) if pods else 0
