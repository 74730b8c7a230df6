"""The scheduling-fit check: every pod of every workload schedules on its node group in a real EKS cluster.

Run by ``compile_fleet``, so ``plan``, ``render``, ``cost`` and the Pulumi program all refuse a plan that
would leave pods Pending. Per node group:

- every pod (init containers and the serving container, as the scheduler counts them: the larger of the
  largest init container and the sum of the others) fits one node's allocatable (hardware/kubelet.py) less the
  DaemonSet allowance, in CPU, memory, ephemeral storage, GPUs and pods;
- the busiest node it may get, filled GPU by GPU with the hungriest pods (the scheduler mixes workloads of a
  group on a node), fits it too, its serving images counted on the pods' disk;
- its max nodes hold every workload at the HPA's max plus its rollout surge (capacity/rollout.py), and in a zonal
  layout every zone's group holds whole multi-node replicas (capacity/node_groups.py);
- a workload whose replicas should spread over more zones than its group spans still schedules (the spread's
  maxSkew of 1 puts two in one zone), so that is a warning (``zone_warnings``), not an error.

Anything else is a CompileError naming the workload (at its models.yaml entry), the node group and instance
type, the shortfall and a fix.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ...errors import Issue
from ...spec.environment import DaemonSetAllowance
from .node_volume import SYSTEM_GIB, serving_images_gib
from .rollout import surge_replicas
from ..sizing import nodes_for_pods
from ..types import FleetPlan, NodeGroupPlan, NodeResourcesPlan, PodPlan, VllmModelPlan, Warning_

ALLOWANCE_KEY = "config.modelfleet:deploy.daemonsetAllowance"
RESOURCES = (("cpu", "CPU cores"), ("memory_gib", "GiB of memory"), ("ephemeral_storage_gib", "GiB of ephemeral storage"))


@dataclass(kw_only=True, frozen=True)
class Placed:
    """One workload as the fit check sees it: its pod, and how many of them a node group must hold."""

    name: str
    path: str  # where the issue points (models[i] of its model or anchor model)
    pod: PodPlan
    gpus_per_pod: int
    slots_per_pod: int  # of its node's pod slots (NodeGroupPlan.pod_slots): its GPUs, or a whole CPU node
    pods_per_replica: int
    max_pods: int  # at the HPA's max plus the rollout surge
    spread_zones: int  # zones its minimum spreads over (0: none)


def pod_resources(pod: PodPlan, gpus: int) -> NodeResourcesPlan:
    return NodeResourcesPlan(cpu=pod.request("cpu_millis") / 1000, memory_gib=round(pod.request("memory_mib") / 1024, 2),
                             ephemeral_storage_gib=pod.request("ephemeral_storage_gib"), gpus=gpus, pods=1)


def free_per_node(group: NodeGroupPlan) -> NodeResourcesPlan:
    a, d = group.allocatable, group.daemonset_allowance
    return NodeResourcesPlan(cpu=round(a.cpu - d.cpu, 3), memory_gib=round(a.memory_gib - d.memory_gib, 2),
                             ephemeral_storage_gib=round(a.ephemeral_storage_gib - d.ephemeral_storage_gib, 2),
                             gpus=a.gpus, pods=a.pods - d.pods)


def _placed(plan: FleetPlan, paths: Mapping[str, str]) -> dict[str, list[Placed]]:
    by_group: dict[str, list[Placed]] = {}
    for s in plan.triton_servers:
        assert s.pod is not None
        by_group.setdefault(s.node_group, []).append(Placed(
            name=s.name, path=paths.get(s.models[0], "models"), pod=s.pod, gpus_per_pod=s.gpus_per_replica,
            slots_per_pod=s.slots_per_replica, pods_per_replica=1, max_pods=s.max_replicas + surge_replicas(s.rollout),
            spread_zones=s.min_replicas if s.spread_zones else 0))
    for m in plan.models:
        if isinstance(m, VllmModelPlan) and m.pod is not None:
            by_group.setdefault(m.node_group, []).append(Placed(
                name=m.name, path=paths.get(m.name, "models"), pod=m.pod, gpus_per_pod=m.gpus_per_pod,
                slots_per_pod=m.gpus_per_pod, pods_per_replica=m.nodes_per_replica,
                max_pods=(m.max_replicas + surge_replicas(m.rollout)) * m.nodes_per_replica,
                spread_zones=m.min_replicas if m.spread_zones else 0))
    return by_group


def busiest_node(group: NodeGroupPlan, placed: list[Placed], system_gib: int, images_gib: int) -> NodeResourcesPlan:
    """A node filled slot by slot (GPU by GPU; a CPU node holds one server pod) with the hungriest pods per
    slot (each resource on its own: an upper bound), the DaemonSet allowance, the serving images and, on the
    root volume, the OS."""
    per_slot = {field: max(getattr(pod_resources(p.pod, p.gpus_per_pod), field) / p.slots_per_pod for p in placed)
                for field, _ in RESOURCES}
    slots = group.pod_slots
    pods = max(slots // p.slots_per_pod for p in placed)
    d = group.daemonset_allowance
    return NodeResourcesPlan(
        cpu=round(per_slot["cpu"] * slots + d.cpu, 3),
        memory_gib=round(per_slot["memory_gib"] * slots + d.memory_gib, 2),
        ephemeral_storage_gib=round(per_slot["ephemeral_storage_gib"] * slots + d.ephemeral_storage_gib
                                    + images_gib + system_gib, 2),
        gpus=group.gpus_per_node, pods=pods + d.pods)


def _shortfalls(need: NodeResourcesPlan, have: NodeResourcesPlan) -> list[str]:
    out = [f"{getattr(need, f):g} {unit} > {getattr(have, f):g}" for f, unit in RESOURCES
           if getattr(need, f) > getattr(have, f) + 1e-9]
    out += [f"{getattr(need, f)} {f} > {getattr(have, f)}" for f in ("gpus", "pods") if getattr(need, f) > getattr(have, f)]
    return out


def _pod_issues(group: NodeGroupPlan, placed: list[Placed]) -> list[Issue]:
    free, issues = free_per_node(group), []
    for p in placed:
        short = _shortfalls(pod_resources(p.pod, p.gpus_per_pod), free)
        if short:
            issues.append(Issue("", 0, 0, p.path, f"{p.name}: a pod cannot schedule on {group.name} "
                                f"({group.instance_type}): it requests {'; '.join(short)} free per node "
                                "(allocatable less the DaemonSet allowance)",
                                "allow a larger instance type, lower the model's footprint, or lower "
                                f"{ALLOWANCE_KEY} if the cluster's DaemonSets need less"))
    return issues


def _node_issue(group: NodeGroupPlan, placed: list[Placed]) -> list[Issue]:
    short = _shortfalls(group.requested, group.allocatable)
    if not short:
        return []
    return [Issue("", 0, 0, placed[0].path, f"node group {group.name} ({group.instance_type}): a node full of "
                  f"{', '.join(p.name for p in placed)} with the DaemonSet allowance and images requests "
                  f"{'; '.join(short)} allocatable",
                  f"give the workloads their own instance type, or lower {ALLOWANCE_KEY}")]


def _capacity_issues(group: NodeGroupPlan, placed: list[Placed]) -> list[Issue]:
    issues = []
    pods: dict[int, int] = {}
    for p in placed:
        pods[p.slots_per_pod] = pods.get(p.slots_per_pod, 0) + p.max_pods
    need = nodes_for_pods(pods, group.pod_slots)
    if need > group.max_size:
        issues.append(Issue("", 0, 0, placed[0].path, f"node group {group.name}: its max of {group.max_size} node(s) "
                            f"cannot hold the HPA max plus surge of its workloads ({need} nodes): a rollout at peak "
                            "would wait for GPUs forever", "raise the group's max (a compiler bug if it persists)"))
    for p in placed:
        if p.pods_per_replica > 1 and len(placed) == 1 and any(z.max_size % p.pods_per_replica for z in group.zonal):
            issues.append(Issue("", 0, 0, p.path, f"{p.name}: a zone group of {group.name} is not sized for whole "
                                f"{p.pods_per_replica}-node replicas", "a compiler bug: report it"))
        if p.pods_per_replica > 1 and not group.zonal:
            issues.append(Issue("", 0, 0, p.path, f"{p.name}: its {p.pods_per_replica}-node replicas need one node "
                                f"group per zone, but {group.name} spans every zone", "a compiler bug: report it"))
    return issues


def with_requested(plan: FleetPlan) -> FleetPlan:
    """Each node group's ``requested``: its busiest node at HPA max plus surge."""
    placed = _placed(plan, {})
    groups = []
    for g in plan.node_groups:
        system = SYSTEM_GIB if g.ephemeral_storage_on == "root-volume" else 0
        requested = busiest_node(g, placed.get(g.name, []), system, serving_images_gib(plan, g.name)) \
            if placed.get(g.name) else g.daemonset_allowance
        groups.append(NodeGroupPlan(**{**dict(g), "requested": requested}))
    return plan.model_copy(update={"node_groups": tuple(groups)})


def check_fit(plan: FleetPlan, paths: Mapping[str, str]) -> list[Issue]:
    """Every issue that would leave a pod Pending in a real cluster (``paths``: model name -> models[i])."""
    issues: list[Issue] = []
    for name, placed in sorted(_placed(plan, paths).items()):
        group = plan.node_group(name)
        issues += _pod_issues(group, placed) + _node_issue(group, placed) + _capacity_issues(group, placed)
    return issues


def zone_warnings(plan: FleetPlan) -> list[Warning_]:
    """Workloads whose availability floor asks for more zones than their node group spans."""
    out = []
    for name, placed in sorted(_placed(plan, {}).items()):
        group = plan.node_group(name)
        out += [Warning_(model=p.name, message=f"its availability floor spreads {p.spread_zones} replicas over zones, "
                         f"but {group.name} spans {len(group.zones)} (modelfleet:availabilityZones): two share a zone")
                for p in placed if p.spread_zones > len(group.zones)]
    return out


def allowance_plan(allowance: DaemonSetAllowance) -> NodeResourcesPlan:
    """``allowance`` as resolved for one node (``DaemonSetAllowance.for_node``)."""
    assert allowance.cpu is not None and allowance.memory_gib is not None
    return NodeResourcesPlan(cpu=allowance.cpu, memory_gib=allowance.memory_gib,
                             ephemeral_storage_gib=allowance.ephemeral_storage_gib, gpus=0, pods=allowance.pods)
