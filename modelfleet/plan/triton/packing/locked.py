"""Packing against the placement lock (spec/lock.py): the locked servers keep their members and names; only
the models the change names (new, changed, or whose locked placement no longer holds) are placed afresh.

A fresh model joins a locked server of its pool where its GPU memory and host RAM fit (one whose replicas
need not grow first, then by name), else it goes, with the other fresh models left, onto new servers packed
as packing/gpu.py packs (optimally among themselves). A new server is named after its pool and a number,
``triton-<pool>`` or ``triton-<pool>-<n>`` (the smallest free), never after a member: the name is recorded in
the lock and kept. ``plan --repack`` re-solves the whole placement instead (the global optimum).
"""

from __future__ import annotations

from ....spec.environment import EnvironmentSpec
from ....spec.lock import StackLock
from ....spec.models import ClassicModelSpec
from ....spec.pipelines import PipelineSpec
from ...hardware.instances import InstanceCatalogue, InstanceType
from ...names import triton_server_name
from ...rejection import Rejection
from ..pipelines import PipelineSizing, together
from ...types import Warning_
from .gpu import (Asks, ClassicPlacement, capacity_of, checked_on, host_capacity_gib, pack_bins,
                  packed_server, placement_of, pool_of, server_replicas)
from .binpacking import Objective
from .choice import gpu_placements


def pack_locked(kept: dict[str, list[ClassicModelSpec]], fresh: list[ClassicModelSpec], env: EnvironmentSpec,
                catalogue: InstanceCatalogue, instance: InstanceType, in_use: tuple[int, int], lock: StackLock,
                pipelines: tuple[PipelineSpec, ...] = ()) -> ClassicPlacement | Rejection:
    """``kept``: locked server name -> its members that keep their place; ``fresh``: the models to place on
    ``instance`` besides them (each already checked to fit its GPU and p99 there)."""
    models = [m for ms in kept.values() for m in ms] + fresh
    checked = checked_on(models, env, catalogue, instance, None, pipelines)
    if isinstance(checked, Rejection):
        return checked
    sized, asks = checked
    groups = {name: list(ms) for name, ms in kept.items()}
    pools = {name: lock.servers[name].pool for name in kept}
    units = together(list(pipelines))
    left: list[ClassicModelSpec] = []
    for model in sorted(fresh, key=lambda m: asks.rank[m.name]):
        target = _join(model, groups, pools, sized, asks, env, instance, units)
        if target is None:
            left.append(model)
        else:
            groups[target].append(model)
    taken = set(lock.servers) | set(groups)
    for pool, members in _new_servers(left, sized, asks, env, instance, in_use, units):
        name = _new_name(pool, taken)
        taken.add(name)
        groups[name] = members
    servers = [packed_server(ms, sized.sizings, asks, env, instance, name) for name, ms in sorted(groups.items())]
    rejected = next((s for s in servers if isinstance(s, Rejection)), None)
    if rejected is not None:
        return rejected
    return placement_of(servers, sized, env, catalogue, instance, in_use)  # type: ignore[arg-type]


def _dedicated(model: ClassicModelSpec, sized: PipelineSizing) -> bool:
    return sized.sizings[model.name].gpu_demand > 1.0 or bool(model.overrides.dedicated_gpu)


def _join(model: ClassicModelSpec, groups: dict[str, list[ClassicModelSpec]], pools: dict[str, str],
          sized: PipelineSizing, asks: Asks, env: EnvironmentSpec, instance: InstanceType,
          units: tuple[tuple[str, ...], ...]) -> str | None:
    """The locked server the model joins, or None (a dedicated model, or none has room). A pipeline step
    goes where its pipeline's other steps are, or nowhere locked."""
    if _dedicated(model, sized):
        return None
    pool = pool_of(model, instance)
    partners = {n for u in units if model.name in u for n in u if n != model.name}
    options = [name for name, ms in groups.items() if name in pools and pools[name] == pool and ms
               and not any(_dedicated(m, sized) for m in ms)]
    if partners:
        options = [name for name in options if partners & {m.name for m in groups[name]}]
    fits = [name for name in options if _fits(groups[name] + [model], sized, asks, env, instance)]
    return min(fits, key=lambda name: (server_replicas(groups[name] + [model], sized.sizings, asks, env)[1]
                                       > server_replicas(groups[name], sized.sizings, asks, env)[1], name), default=None)


def _fits(members: list[ClassicModelSpec], sized: PipelineSizing, asks: Asks, env: EnvironmentSpec,
          instance: InstanceType) -> bool:
    memory = sum(sized.sizings[m.name].gpu_memory_gib for m in members)
    return memory <= capacity_of(instance) and not isinstance(
        packed_server(members, sized.sizings, asks, env, instance, "probe"), Rejection)


def _new_servers(left: list[ClassicModelSpec], sized: PipelineSizing, asks: Asks, env: EnvironmentSpec,
                 instance: InstanceType, in_use: tuple[int, int],
                 units: tuple[tuple[str, ...], ...]) -> list[tuple[str, list[ClassicModelSpec]]]:
    """The models no locked server took, by pool: a dedicated one alone, the others packed optimally."""
    out: list[tuple[str, list[ClassicModelSpec]]] = []
    by_pool: dict[str, list[ClassicModelSpec]] = {}
    for model in left:
        by_pool.setdefault(pool_of(model, instance), []).append(model)
    for pool, models in sorted(by_pool.items()):
        alone = [m for m in models if _dedicated(m, sized)]
        out += [(pool, [m]) for m in alone]
        shared = [m for m in models if m not in alone]
        if not shared:
            continue
        grouped = _grouped(shared, units, asks)
        objective = Objective(instance.gpus, in_use[0], in_use[1], 1 if env.replicas.single_replica else float("inf"))
        by_name = {m.name: m for m in shared}
        for names in pack_bins(grouped, sized.sizings, asks, capacity_of(instance), host_capacity_gib(instance, env),
                           objective):
            out.append((pool, [by_name[n] for n in names]))
    return out


def _grouped(models: list[ClassicModelSpec], units: tuple[tuple[str, ...], ...],
             asks: Asks) -> list[list[ClassicModelSpec]]:
    names = {m.name: m for m in models}
    grouped = [[names[n] for n in u if n in names] for u in units]
    grouped = [g for g in grouped if g]
    inside = {m.name for g in grouped for m in g}
    return [sorted(g, key=lambda m: asks.rank[m.name]) for g in grouped + [[m] for m in models if m.name not in inside]]


def _new_name(pool: str, taken: set[str]) -> str:
    """``triton-<pool>``, else ``triton-<pool>-<n>``, the smallest n from 2 no server has."""
    first = triton_server_name(pool)
    if first not in taken:
        return first
    number = 2
    while triton_server_name(pool, str(number)) in taken:
        number += 1
    return triton_server_name(pool, str(number))


def locked_gpu_placements(models: list[ClassicModelSpec], pipelines: tuple[PipelineSpec, ...], env: EnvironmentSpec,
                          catalogue: InstanceCatalogue, in_use: dict[str, tuple[int, int]], lock: StackLock,
                          fresh: frozenset[str], warnings: list[Warning_]) -> list[ClassicPlacement] | None:
    """The GPU models' placements with the lock: each locked instance type's servers kept, the fresh models
    (``fresh``: new or changed) joining them on the type most locked models use where they fit its GPU and
    p99, else packed onto the cheapest type for them alone. None: nothing here is locked (today's placement)."""
    allowed = {i.name: i for i in catalogue.in_families(env.instance_families)}
    kept: dict[str, dict[str, list[ClassicModelSpec]]] = {}
    moved: list[ClassicModelSpec] = []
    for model in models:
        entry = lock.classic.get(model.name)
        if entry is None or model.name in fresh or entry.server not in lock.servers:
            moved.append(model)
        elif entry.instance_type not in allowed:
            moved.append(model)
            warnings.append(_replaced(model.name, f"its locked instance type {entry.instance_type} is no longer in "
                                      "the price table or the stack's instance families"))
        else:
            kept.setdefault(entry.instance_type, {}).setdefault(entry.server, []).append(model)
    if not kept:
        return None
    for instance_type in sorted(kept):
        moved += _unfit(kept[instance_type], allowed[instance_type], pipelines, env, catalogue, warnings)
    kept = {t: s for t, s in kept.items() if s}
    if not kept:
        return None
    primary = min(kept, key=lambda t: (-sum(len(ms) for ms in kept[t].values()), t))
    joins = [m for m in moved if _fits_alone(m, allowed[primary], pipelines, env, catalogue)]
    misfits = [m for m in moved if m not in joins]
    out: list[ClassicPlacement] = []
    for instance_type in sorted(kept):
        mine = [m for ms in kept[instance_type].values() for m in ms] + (joins if instance_type == primary else [])
        placed = pack_locked(kept[instance_type], joins if instance_type == primary else [], env, catalogue,
                             allowed[instance_type], in_use.get(instance_type, (0, 0)), lock, _within(pipelines, mine))
        if isinstance(placed, Rejection):
            warnings.append(_replaced("placement lock", f"the locked servers on {instance_type} no longer hold: "
                                      f"{placed.reason}; every Triton model re-placed"))
            return None
        out.append(placed)
    if misfits:
        fits, _ = gpu_placements(misfits, _within(pipelines, misfits), env, catalogue, in_use, exact=1)
        if not fits:
            return None
        out.append(fits[0])
    return out


def _within(pipelines: tuple[PipelineSpec, ...], models: list[ClassicModelSpec]) -> tuple[PipelineSpec, ...]:
    names = {m.name for m in models}
    return tuple(p for p in pipelines if set(p.step_models()) <= names)


def _check(models: list[ClassicModelSpec], instance: InstanceType, pipelines: tuple[PipelineSpec, ...],
           env: EnvironmentSpec, catalogue: InstanceCatalogue):
    return checked_on(models, env, catalogue, instance, None, _within(pipelines, models))


def _fits_alone(model: ClassicModelSpec, instance: InstanceType, pipelines: tuple[PipelineSpec, ...],
                env: EnvironmentSpec, catalogue: InstanceCatalogue) -> bool:
    """A server of the model alone fits ``instance``: its GPU, its p99 and the host RAM of a pod there."""
    checked = _check([model], instance, pipelines, env, catalogue)
    return not isinstance(checked, Rejection) and not isinstance(
        packed_server([model], checked[0].sizings, checked[1], env, instance, "probe"), Rejection)


def _unfit(servers: dict[str, list[ClassicModelSpec]], instance: InstanceType, pipelines: tuple[PipelineSpec, ...],
           env: EnvironmentSpec, catalogue: InstanceCatalogue, warnings: list[Warning_]) -> list[ClassicModelSpec]:
    """Locked models that no longer fit their GPU or p99 on ``instance`` (a catalogue change): taken out of
    their servers to be re-placed, each with the reason."""
    out = []
    for name in sorted(servers):
        for model in list(servers[name]):
            rejected = _check([model], instance, pipelines, env, catalogue)
            if isinstance(rejected, Rejection):
                servers[name].remove(model)
                out.append(model)
                warnings.append(_replaced(model.name, f"its locked placement on {instance.name} no longer holds: "
                                          f"{rejected.reason}"))
        if not servers[name]:
            del servers[name]
    return out


def _replaced(model: str, why: str) -> Warning_:
    return Warning_(model=model, message=f"re-placed despite the placement lock: {why}")
