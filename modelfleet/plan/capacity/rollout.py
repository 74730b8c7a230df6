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

A canary (spec/rollout.py) runs under Argo Rollouts instead: the new pods beside the old ones, a share of the
traffic at each step, an analysis from the SLA gating every step. Its extra replicas (``canary_replicas``) are
the workload's surge: the node group's max holds them above the HPA's max, so the fit check covers them.
"""

from __future__ import annotations

import math

from ...errors import Issue
from ...spec.environment import EnvironmentSpec
from ...spec.models import LlmModelSpec
from ...spec.rollout import ROLLING, RolloutSpec
from ..sizing import replica_floor
from ..types import RolloutPlan, Warning_


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


# ---------------------------------------------------------------------------------------------- canaries
def resolve_rollout(own: RolloutSpec | None, env: EnvironmentSpec) -> RolloutSpec:
    """A model's own rollout, else its stack's (modelfleet:rollout), else rolling."""
    return own or env.rollout or ROLLING


def merge_rollouts(specs: list[RolloutSpec]) -> RolloutSpec:
    """A server's rollout from its models' (one pod template serves them all): a canary when any of them asks,
    through every step any asks for, each watched for the longest pause any asks for."""
    canaries = [s for s in specs if s.strategy == "canary"]
    if not canaries:
        return ROLLING
    steps = tuple(sorted({step for s in canaries for step in s.canary_steps}))
    longest = max(canaries, key=lambda s: s.pause_s)
    return RolloutSpec(strategy="canary", steps=steps, pause=longest.pause or None)


def canary_replicas(replicas: int, steps: tuple[int, ...], gateway: bool) -> int:
    """Replicas above ``replicas`` a canary runs at its fullest step, as Argo Rollouts scales it.

    Replica ratio (no gateway): ``maxSurge: 1``, so canary and stable together never exceed replicas + 1.
    Gateway (``dynamicStableScale``): at weight w the canary is ceil(w% x R); the stable shrinks to ceil((100 -
    w)% x R) only once the traffic has moved, so while a step's weights change it still holds the previous
    step's count."""
    if not gateway:
        return 1
    worst, previous = 0, 0
    for weight in steps:
        canary = math.ceil(weight * replicas / 100)
        stable = max(math.ceil((100 - weight) * replicas / 100), math.ceil((100 - previous) * replicas / 100))
        worst, previous = max(worst, canary + stable - replicas), weight
    return worst


def split_text(replicas: int, steps: tuple[int, ...], gateway: bool) -> str:
    """What share of the traffic each step really gives the canary at ``replicas``."""
    if gateway:
        return "HTTPRoute weights " + ", ".join(f"{w}%" for w in steps) + " (exact)"
    shares = []
    for weight in steps:
        canary, total = _basic_split(replicas, weight)
        shares.append(f"{weight}% -> {canary}/{total} pods")
    return ("replica ratio, approximate (no gateway: the Service spreads requests over pods), at "
            f"{replicas} replica(s): " + ", ".join(shares))


def _basic_split(replicas: int, weight: int) -> tuple[int, int]:
    """Argo Rollouts' basic canary with maxSurge 1 (``approximateWeightedCanaryStableReplicaCounts``): the
    (canary, total) pod counts whose share is closest to ``weight``, the first of equals winning."""
    if weight == 100:
        return replicas, replicas
    ceil_c, floor_c = math.ceil(replicas * weight / 100), math.floor(replicas * weight / 100)

    def tied(total: int) -> bool:
        return math.modf(total * weight / 100)[0] == 0.5

    options = [(ceil_c, replicas)] if ceil_c < replicas else []
    options += [(floor_c, replicas)] if not tied(replicas) and floor_c else []
    options += [(ceil_c, replicas + 1)] + ([(floor_c, replicas + 1)] if not tied(replicas + 1) and floor_c else [])
    best = options[0]
    for option in options[1:]:
        if abs(100 * option[0] / option[1] - weight) < abs(100 * best[0] / best[1] - weight):
            best = option
    return best


def canary_rollout(spec: RolloutSpec, replicas: tuple[int, int, int], gateway: bool) -> RolloutPlan:
    """``replicas``: min, desired, max."""
    _, desired, high = replicas
    extra = canary_replicas(high, spec.canary_steps, gateway)
    pause = f"{spec.pause_s // 60} min" if spec.pause_s % 60 == 0 else f"{spec.pause_s} s"
    return RolloutPlan(
        max_surge=extra, max_unavailable=0, strategy="canary", steps=spec.canary_steps, pause_s=spec.pause_s,
        traffic="gateway" if gateway else "replicas", extra_replicas_desired=canary_replicas(desired, spec.canary_steps,
                                                                                                gateway),
        reason=f"canary (Argo Rollouts): steps {', '.join(f'{w}%' for w in spec.canary_steps)}, {pause} each, "
               f"analysis from the SLA aborts and rolls back; {split_text(desired, spec.canary_steps, gateway)}; "
               f"the node group's max holds {extra} replica(s) above the HPA's max for the canary")


def workload_rollout(specs: list[RolloutSpec], env: EnvironmentSpec, replicas: tuple[int, int, int], floor: int,
                     nodes_per_replica: int, instance_type: str, cpu: bool = False) -> RolloutPlan:
    """The rollout of one workload serving models that asked for ``specs`` (already resolved); ``cpu``: a
    KIND_CPU Triton server (its replica holds a whole CPU node)."""
    merged = merge_rollouts(specs)
    if merged.strategy == "canary" and nodes_per_replica == 1:
        return canary_rollout(merged, replicas, env.gateway is not None)
    return choose_rollout(replicas[0], floor, nodes_per_replica, instance_type, cpu=cpu)


def llm_rollout(model: LlmModelSpec, env: EnvironmentSpec, replicas: tuple[int, int, int], nodes_per_replica: int,
                instance_type: str, index: int, issues: list[Issue], warnings: list[Warning_]) -> RolloutPlan:
    """A vLLM model's rollout. A multi-node replica is a LeaderWorkerSet group, which Argo Rollouts cannot
    manage: a canary it asks for itself is an error, one its stack asks for falls back to rolling (warned)."""
    spec = resolve_rollout(model.rollout, env)
    if spec.strategy == "canary" and nodes_per_replica > 1:
        message = (f"a canary needs single-node replicas, but {model.name} spans {nodes_per_replica} nodes per "
                   "replica (a LeaderWorkerSet group, which Argo Rollouts cannot manage)")
        if model.rollout is not None:
            issues.append(Issue("", 0, 0, f"models[{index}].rollout", message,
                                "use strategy: rolling for this model, or a layout of one node per replica"))
        else:
            warnings.append(Warning_(model=model.name, message=message + "; it rolls instead"))
    return workload_rollout([spec], env, replicas, replica_floor(env, model.sla.availability), nodes_per_replica,
                            instance_type)
