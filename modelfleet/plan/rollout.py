"""How a workload's pods are replaced on an update: surge one replica, or take one down first.

A rolling update with ``maxSurge: 1, maxUnavailable: 0`` starts a new replica before stopping an old one. A
GPU replica needs GPUs nobody else holds: at the HPA's ``maxReplicas`` every GPU the node group may have is
taken, so the surge pod waits for a node the group may not add and the rollout stalls at peak. Two ways out:

- surge: the node group's max covers the HPA's max plus one replica of every workload on it (a single
  ``pulumi up`` rolls them all), which raises only the group's ceiling, and so the "max" cost;
- ``maxSurge: 0, maxUnavailable: 1``: no extra GPUs, but a replica is gone while its successor loads.

The second costs nothing, so it is chosen wherever availability allows it: when the replicas left at the
HPA's minimum still meet the availability floor (the replicas the SLA's availability asks for, in their
zones). Otherwise a rollout would take the fleet below the floor the SLA is planned on, so the group surges.
"""

from __future__ import annotations

from ..spec.environment import EnvironmentSpec
from .sizing import availability_floor
from .types import RolloutPlan


def replica_floor(env: EnvironmentSpec, availability: float) -> int:
    """Replicas the availability SLA demands (1 in a single-replica environment)."""
    if env.replicas.single_replica:
        return 1
    return availability_floor(availability, env.replicas.ha_availability, env.replicas.ha3_availability)


def choose_rollout(min_replicas: int, floor: int, nodes_per_replica: int, instance_type: str,
                   cpu: bool = False) -> RolloutPlan:
    """``floor``: the replicas availability alone demands (1 in a single-replica environment); ``cpu``: a
    KIND_CPU server, whose replica holds a whole CPU node."""
    if min_replicas - 1 >= max(1, floor):
        return RolloutPlan(max_surge=0, max_unavailable=1,
                           reason=f"maxUnavailable 1: at the HPA's minimum ({min_replicas}) a rollout still leaves "
                                  f"{min_replicas - 1} replica(s), at least the availability floor of {floor}, and "
                                  f"needs no {'nodes' if cpu else 'GPUs'} above the HPA's max")
    nodes = (f"{nodes_per_replica} x {instance_type}" if nodes_per_replica > 1 else
             f"its {instance_type} node" if cpu else f"its GPUs on {instance_type}")
    return RolloutPlan(max_surge=1, max_unavailable=0,
                       reason=f"maxSurge 1: the node group's max holds one replica ({nodes}) above the HPA's max; "
                              f"maxUnavailable 1 would leave {min_replicas - 1} replica(s) at the HPA's minimum, "
                              f"below the availability floor of {max(1, floor)}")


def surge_replicas(rollout: RolloutPlan | None) -> int:
    return 0 if rollout is None else rollout.max_surge
