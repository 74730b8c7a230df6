"""What provisions each node group's nodes, and what they may be: the provisioner seam's plan side.

``nodes.provisioner`` (spec/environment.py) is recorded on every group; modelfleet/deploy/provisioners turns
the group into EKS managed node groups or Karpenter NodePools. For a Karpenter pool the plan also decides:

- ``instance_types``: the chosen type first (what the plan sized and priced: a reservation of it can make it the
  cheapest where its ranking price is not), then its equivalents in cost order (the stack's ranking price, as
  the compiler ranks): the same GPU model and the same GPUs per node (so the plan's node counts, limits and
  costs hold whichever Karpenter launches), of a family the stack allows and no policy forbids on the pool's
  capacity types, that keeps the pods' writes where the plan put them (the instance store, RAID0) within the
  pool's root volume, and that passes the scheduling-fit check (capacity/fit.py) with the group's workloads;
- ``capacity_types``: reserved first where the stack has reservations of the type, then the stack's own;
  a spot pool falls back to on-demand (an InsufficientInstanceCapacity no longer leaves a model unserved)
  unless a policy forbids the family on-demand.

On spot (either provisioner), a workload whose availability floor is two or more replicas cannot ride on spot
alone: a reclaim can take every spot node of a type at once, with two minutes' notice. Its floor is held on
on-demand nodes (``on_demand_base_replicas``; its group's ``on_demand_base_nodes``), and only the replicas
above it ride on spot.
"""

from __future__ import annotations

from collections import Counter

from ...spec.environment import EnvironmentSpec
from ..hardware.instances import InstanceCatalogue, InstanceType
from ..hardware.node_price import ranking_usd_per_node_hour
from ..sizing import nodes_for_pods, on_demand_replicas
from ..types import FleetPlan, NodeGroupPlan, VllmModelPlan
from .fit import check_fit, with_requested
from .node_disks import node_disks


def forbidden(env: EnvironmentSpec, family: str, capacity_type: str) -> bool:
    """Whether the stack's policies forbid ``family`` on ``capacity_type``."""
    allowed = env.policies.allowed_families
    if allowed is not None and family not in allowed:
        return True
    return any(family in rule.families and rule.capacity_type in (None, capacity_type) for rule in env.policies.forbid)


def capacity_types(group: NodeGroupPlan, env: EnvironmentSpec, family: str) -> tuple[str, ...]:
    types: list[str] = ["reserved"] if any(r.instance_type == group.instance_type for r in env.capacity_reservations) else []
    types.append(env.capacity_type)
    if env.capacity_type == "spot" and not forbidden(env, family, "on-demand"):
        types.append("on-demand")
    return tuple(types)


def _candidates(group: NodeGroupPlan, chosen: InstanceType, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                kinds: tuple[str, ...]) -> list[InstanceType]:
    """Same GPU model and GPUs per node, an allowed family, cheapest first (ties by name)."""
    same = [i for i in catalogue.instances.values()
            if i.gpu.key == chosen.gpu.key and i.gpus == chosen.gpus and i.family in env.instance_families
            and not any(forbidden(env, i.family, k) for k in kinds if k != "reserved")]
    return sorted(same, key=lambda i: (ranking_usd_per_node_hour(catalogue, i, env), i.name))


def variant_fits(plan: FleetPlan, group: NodeGroupPlan, instance: InstanceType, env: EnvironmentSpec,
                  catalogue: InstanceCatalogue) -> bool:
    """The group on ``instance`` instead: its pods' writes where they were, its volume no larger, and every pod
    and node passing the fit check."""
    variant = group.model_copy(update={"instance_type": instance.name, "vcpu": instance.vcpu, "ram_gib": instance.ram_gib})
    variant = NodeGroupPlan.model_construct(**{**dict(variant), **node_disks(plan, variant, env, catalogue)})
    if (variant.ephemeral_storage_on != group.ephemeral_storage_on or variant.root_volume_gib > group.root_volume_gib):
        return False
    swapped = plan.model_copy(update={"node_groups": tuple(variant if g.name == group.name else g
                                                           for g in plan.node_groups)})
    return not check_fit(with_requested(swapped), {})


def equivalent_types(plan: FleetPlan, group: NodeGroupPlan, env: EnvironmentSpec,
                     catalogue: InstanceCatalogue, kinds: tuple[str, ...]) -> tuple[str, ...]:
    """The group's type, then every equivalent that keeps the plan valid, in cost order (see the docstring)."""
    chosen = catalogue.instances.get(group.instance_type)
    if chosen is None:  # a CPU group: its one type
        return (group.instance_type,)
    fits = [i.name for i in _candidates(group, chosen, env, catalogue, kinds)
            if i.name != chosen.name and variant_fits(plan, group, i, env, catalogue)]
    return (chosen.name, *fits)


def base_replicas(plan: FleetPlan, env: EnvironmentSpec) -> dict[str, int]:
    """Per workload on a spot stack: the replicas of its availability floor held on on-demand nodes."""
    workloads = [*plan.triton_servers, *(m for m in plan.models if isinstance(m, VllmModelPlan))]
    return {w.name: held for w in workloads if (held := on_demand_replicas(env, w.min_replicas))}


def base_nodes(plan: FleetPlan, group: NodeGroupPlan, base: dict[str, int]) -> int:
    pods: Counter[int] = Counter()
    for s in plan.triton_servers:
        if s.node_group == group.name and base.get(s.name):
            pods[s.slots_per_replica] += base[s.name]
    for m in plan.models:
        if isinstance(m, VllmModelPlan) and m.node_group == group.name and base.get(m.name):
            pods[m.gpus_per_pod] += base[m.name] * m.nodes_per_replica
    return nodes_for_pods(pods, group.pod_slots) if pods else 0


def with_provisioning(plan: FleetPlan, env: EnvironmentSpec, catalogue: InstanceCatalogue) -> FleetPlan:
    """Every group's provisioner and, for Karpenter, its types and capacity types; the spot on-demand base."""
    base = base_replicas(plan, env)
    groups = []
    for group in plan.node_groups:
        update: dict = {"provisioner": env.nodes.provisioner, "on_demand_base_nodes": base_nodes(plan, group, base)}
        if env.nodes.provisioner == "karpenter":
            node_type = catalogue.node_type(group.instance_type)
            kinds = capacity_types(group, env, node_type.family if node_type else "")
            update |= {"capacity_types": kinds, "instance_types": equivalent_types(plan, group, env, catalogue, kinds)}
        groups.append(group.model_copy(update=update))
    servers = tuple(s.model_copy(update={"on_demand_base_replicas": base.get(s.name, 0)}) for s in plan.triton_servers)
    models = tuple(m.model_copy(update={"on_demand_base_replicas": base.get(m.name, 0)})
                   if isinstance(m, VllmModelPlan) else m for m in plan.models)
    return plan.model_copy(update={"node_groups": tuple(groups), "triton_servers": servers, "models": models})
