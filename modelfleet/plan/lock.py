"""The placement lock in the plan stage: which models a change names, keeping the others where the lock has
them, and the lock a plan records (spec/lock.py has the file's shape).

A model the change names is *fresh*: not in the lock, or its digest (of its spec as the stack compiles it)
differs. Every other model keeps its locked placement while that still holds: a classic model its server
(triton/packing/locked.py), a candidate for CPU nodes its device, an LLM its instance type and layout
(``pinned_llm``). Replicas are never locked: load still scales them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Container

from ..spec.lock import ClassicLock, LlmLock, NodeGroupLock, ServerLock, StackLock
from ..spec.models import ClassicModelSpec, LlmModelSpec
from .types import FleetPlan, TritonModelPlan, VllmModelPlan

ModelSpec = ClassicModelSpec | LlmModelSpec


def spec_digest(model: ModelSpec) -> str:
    """What the compiler reads of a model, hashed: a model whose digest changes was changed. Defaults are left
    out, so a release that adds a key with a default changes no digest (and re-places nothing)."""
    return hashlib.sha256(model.model_dump_json(exclude_defaults=True).encode()).hexdigest()[:16]


def fresh_models(models: list[ModelSpec], lock: StackLock) -> frozenset[str]:
    """The models a change names: new to the lock, or changed since it was written."""
    out = set()
    for model in models:
        entry = (lock.classic if isinstance(model, ClassicModelSpec) else lock.llms).get(model.name)
        if entry is None or entry.digest != spec_digest(model):
            out.add(model.name)
    return frozenset(out)


def pinned_device(model: ClassicModelSpec, lock: StackLock, cpu_types: Container[str]) -> ClassicModelSpec:
    """A locked model the compiler may move between CPU and GPU nodes stays on the side the lock has it
    (``cpu_types``: the CPU instance types, InstanceCatalogue.cpu_instances)."""
    entry = lock.classic.get(model.name)
    if entry is None or model.device is not None:
        return model
    return model.model_copy(update={"device": "cpu" if entry.instance_type in cpu_types else "gpu"})


def pinned_llm(model: LlmModelSpec, entry: LlmLock) -> LlmModelSpec:
    """The LLM searched at its locked instance type, layout and precision only (its replicas still free)."""
    overrides = model.overrides.model_copy(update={
        "instance_type": entry.instance_type, "tensor_parallel_size": entry.tp, "pipeline_parallel_size": entry.pp,
        "expert_parallel": entry.ep if model.overrides.expert_parallel is not None or entry.ep else None})
    update: dict = {"overrides": overrides}
    if model.precision is not None:
        update["precision"] = (entry.precision,)
    return model.model_copy(update=update)


def lock_of(plan: FleetPlan, specs: dict[str, ModelSpec]) -> StackLock:
    """What ``plan`` placed, as the stack's lock section (``specs``: the models as the stack compiles them)."""
    classic, llms = {}, {}
    for model in plan.models:
        digest = spec_digest(specs[model.name])
        if isinstance(model, TritonModelPlan):
            pool = specs[model.name].pool or model.instance_type.replace(".", "-")  # type: ignore[union-attr]
            classic[model.name] = ClassicLock(server=model.server, pool=pool, node_group=model.node_group,
                                              instance_type=model.instance_type, digest=digest)
        else:
            assert isinstance(model, VllmModelPlan)
            llms[model.name] = LlmLock(instance_type=model.instance_type, node_group=model.node_group,
                                       tp=model.tensor_parallel_size, pp=model.pipeline_parallel_size,
                                       ep=model.expert_parallel, precision=model.dtype, digest=digest)
    servers = {s.name: ServerLock(pool=_server_pool(s.models, classic), instance_type=s.instance_type,
                                  models=tuple(s.models)) for s in plan.triton_servers}
    groups = {g.name: NodeGroupLock(instance_type=g.instance_type, teams=group_teams(plan, g.name))
              for g in plan.node_groups}
    return StackLock(classic=dict(sorted(classic.items())), llms=dict(sorted(llms.items())),
                     servers=dict(sorted(servers.items())), node_groups=dict(sorted(groups.items())))


def _server_pool(models: tuple[str, ...], classic: dict[str, ClassicLock]) -> str:
    return classic[models[0]].pool


def group_teams(plan: FleetPlan, group: str) -> tuple[str, ...]:
    """The teams whose models run on ``group``, sorted (a reviewer sees a team join in the lock's diff)."""
    return tuple(sorted({m.team or "unassigned" for m in plan.models if m.node_group == group}))


def touched_models(before: FleetPlan, after: FleetPlan, named: frozenset[str]) -> tuple[str, ...]:
    """What a change does to models: the ones it names (added, removed, changed), then every other model whose
    Triton server changes membership (its pods roll), with the reason; for ``preview --base``."""
    old, new = {m.name: m for m in before.models}, {m.name: m for m in after.models}
    lines = [f"models this change names: {', '.join(sorted(named))}"] if named else []
    for server in after.triton_servers:
        was = next((s for s in before.triton_servers if s.name == server.name), None)
        if was is None or set(was.models) == set(server.models):
            continue
        joined, left = sorted(set(server.models) - set(was.models)), sorted(set(was.models) - set(server.models))
        why = "; ".join(part for part in (f"{', '.join(joined)} joins it" if joined else "",
                                          f"{', '.join(left)} leaves it" if left else "") if part)
        for name in sorted(set(server.models) & set(was.models) - named):
            lines.append(f"{name} changes although this change does not name it: its server {server.name} rolls ({why})")
    for name in sorted(set(old) & set(new) - named):
        if placement_of(old[name]) != placement_of(new[name]):
            lines.append(f"{name} moves although this change does not name it: {placement_of(old[name])} -> "
                         f"{placement_of(new[name])}")
    return tuple(lines)


def placement_of(model: TritonModelPlan | VllmModelPlan) -> str:
    if isinstance(model, TritonModelPlan):
        return f"{model.server} on {model.instance_type}"
    return (f"{model.instance_type} tp={model.tensor_parallel_size} pp={model.pipeline_parallel_size} "
            f"{model.dtype}")


def changed_models(before: list[ModelSpec], after: list[ModelSpec]) -> frozenset[str]:
    """The models a change names: added, removed, or with another digest."""
    old, new = {m.name: spec_digest(m) for m in before}, {m.name: spec_digest(m) for m in after}
    return frozenset(n for n in set(old) | set(new) if old.get(n) != new.get(n))
