"""Node groups: one per instance type, with the nodes its workloads need at min, desired and max replicas (max
plus every workload's rollout surge), and the zones it spans.

Zones. A managed node group is one Auto Scaling group; given subnets in several zones, AWS balances its nodes
across them, and neither it nor the cluster autoscaler can put a node in the zone a pod's peers already
chose. A multi-node replica (a LeaderWorkerSet group: pipeline stages that talk constantly) must sit whole in
one zone, so a group hosting one is **zonal**: one node group per zone, each sized for whole replicas, the
replicas dealt round-robin from zone-1 (replica i in zone i mod Z), so the zones the HPA's minimum needs are
always the first ones and every zone group's sizes are whole replicas. The autoscaler then grows the zone
whose group can place the pending leader and its workers, and the leader's zone spread puts successive
replicas in different zones. Any other group is one node group over all the stack's zones, at least one
node per zone its spread workloads ask for.

Zone names are the stack's zones in order (``zone-1`` .. ``zone-N``, N = ``availabilityZones``): the deploy
maps zone-i to the i-th availability zone of the node groups' subnets (modelfleet.deploy.node_groups).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .rollout import surge_replicas
from ..sizing import nodes_for_pods
from ..types import TritonServerPlan, VllmModelPlan, ZoneSizePlan

LEVELS = ("min", "desired", "max")


def zone_names(count: int) -> tuple[str, ...]:
    return tuple(f"zone-{i}" for i in range(1, count + 1))


@dataclass
class _Workload:
    gpus_per_pod: int
    pods_per_replica: int
    replicas: dict[str, int]  # level -> replicas (max includes the rollout surge)
    spread: int  # zones its minimum spreads over (1: none)


@dataclass
class GroupSizes:
    """What ``_node_groups`` needs to build one NodeGroupPlan."""

    sizes: dict[str, int]
    zones: tuple[str, ...]
    zonal: tuple[ZoneSizePlan, ...]
    zone_reason: str
    workloads: list[str] = field(default_factory=list)


def _workloads(servers: list[TritonServerPlan], llms: list[VllmModelPlan]) -> dict[str, list[tuple[str, _Workload]]]:
    """Per instance type: (name, pods) of every workload placed on it."""
    by_type: dict[str, list[tuple[str, _Workload]]] = {}
    for s in servers:
        levels = {"min": s.min_replicas, "desired": s.replicas, "max": s.max_replicas + surge_replicas(s.rollout)}
        by_type.setdefault(s.instance_type, []).append(
            (s.name, _Workload(s.slots_per_replica, 1, levels, s.min_replicas if s.spread_zones else 1)))
    for p in llms:
        levels = {"min": p.min_replicas, "desired": p.replicas, "max": p.max_replicas + surge_replicas(p.rollout)}
        by_type.setdefault(p.instance_type, []).append(
            (p.name, _Workload(p.gpus_per_pod, p.nodes_per_replica, levels, p.min_replicas if p.spread_zones else 1)))
    return by_type


def _spanning(workloads: list[_Workload], gpus_per_node: int, zones: tuple[str, ...]) -> GroupSizes:
    spread = max(w.spread * w.pods_per_replica for w in workloads)
    sizes = {}
    for level in LEVELS:
        pods: Counter[int] = Counter()
        for w in workloads:
            pods[w.gpus_per_pod] += w.replicas[level] * w.pods_per_replica
        sizes[level] = max(nodes_for_pods(pods, gpus_per_node), spread if level != "min" or pods.total() else 0)
    reason = (f"one node group over the stack's {len(zones)} zone(s); AWS balances its nodes across them"
              + (f", at least {spread} node(s) for the replicas spread over zones" if spread > 1 else ""))
    return GroupSizes(sizes, zones, (), reason)


def _zonal(workloads: list[_Workload], gpus_per_node: int, zones: tuple[str, ...]) -> GroupSizes:
    per_zone: dict[str, dict[str, int]] = {z: {} for z in zones}
    for level in LEVELS:
        for index, zone in enumerate(zones):
            pods: Counter[int] = Counter()
            for w in workloads:
                dealt = len(range(index, w.replicas[level], len(zones)))  # replicas index, index + Z, ...
                pods[w.gpus_per_pod] += dealt * w.pods_per_replica
            per_zone[zone][level] = nodes_for_pods(pods, gpus_per_node)
    # a zone no replica reaches even at max gets no group (EKS needs a max of at least 1)
    zonal = tuple(ZoneSizePlan(zone=z, min_size=s["min"], desired_size=s["desired"], max_size=s["max"])
                  for z, s in per_zone.items() if s["max"])
    sizes = {level: sum(s[level] for s in per_zone.values()) for level in LEVELS}
    reason = (f"one node group per zone ({len(zonal)} of the stack's {len(zones)}): a multi-node replica must sit "
              "whole in one zone, which one Auto Scaling group over several zones cannot promise; replicas are "
              "dealt round-robin from zone-1, each zone's group sized for its whole replicas")
    return GroupSizes(sizes, tuple(z.zone for z in zonal), zonal, reason)


def size_node_groups(servers: list[TritonServerPlan], llms: list[VllmModelPlan], gpus_per_node: dict[str, int],
                     zone_count: int) -> dict[str, GroupSizes]:
    """Instance type -> its node group's sizes and zones. ``gpus_per_node``: each type's pod slots (its GPUs;
    1 for a CPU type, whose node holds one KIND_CPU server pod)."""
    zones = zone_names(zone_count)
    out = {}
    for instance_type, named in sorted(_workloads(servers, llms).items()):
        workloads = [w for _, w in named]
        layout = _zonal if any(w.pods_per_replica > 1 for w in workloads) else _spanning
        sizes = layout(workloads, gpus_per_node[instance_type], zones)
        sizes.workloads = sorted(name for name, _ in named)
        out[instance_type] = sizes
    return out
