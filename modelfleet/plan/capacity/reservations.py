"""Capacity reservations (EC2 On-Demand Capacity Reservations and Capacity Blocks for ML) as the plan uses them.

A stack lists what it has reserved (``capacityReservations``). Reserved instances are paid whether they run
anything or not, so their marginal cost is zero: the LLM search and the Triton GPU packing price a placement's
nodes beyond the reserved ones only (hardware/node_price.py ``ranking_usd_per_hour``; the LLMs are placed
first and take the reserved nodes first), so a model that fits on a reserved type goes there first, and a
node group of a reserved type launches its reserved nodes before any other (Karpenter prefers the ``reserved`` capacity type;
a managed group's reserved nodes are a node group of their own whose launch template targets the
reservation: modelfleet/deploy/provisioners). The cost preview shows each reservation's own cost once, and
charges its group only for the nodes beyond it (cost/fleet.py). The plan warns when a reservation is unused,
only partly used, or short of what the plan needs of its type (the rest on the stack's own capacity type).

A reservation lives in one availability zone, so a group of its type keeps its multi-node replicas whole there:
the reserved nodes come first and the LeaderWorkerSet's zone affinity holds the group's workers beside them.
A Capacity Block ends on a date: the plan warns with the date, as its instances are reclaimed then.
"""

from __future__ import annotations

from ...spec.environment import CapacityReservationSpec, EnvironmentSpec
from ..hardware.instances import InstanceCatalogue
from ..types import FleetPlan, ReservationPlan, Warning_


def reserved_count(env: EnvironmentSpec, instance_type: str) -> int:
    """Instances of ``instance_type`` the stack has reserved."""
    return sum(r.count for r in env.capacity_reservations if r.instance_type == instance_type)


def billed_nodes(env: EnvironmentSpec, instance_type: str, nodes: int) -> int:
    """Of ``nodes`` of a type, those beyond its reservations: what a placement adds to the bill."""
    return max(0, nodes - reserved_count(env, instance_type))


def consume(env: EnvironmentSpec, instance_type: str, nodes: int) -> EnvironmentSpec:
    """The stack with ``nodes`` of ``instance_type``'s reservations taken (by the model placed before): the next
    placement sees only what is left, so two models never both count the same reserved node as free."""
    left, kept = nodes, []
    for reservation in env.capacity_reservations:
        if reservation.instance_type == instance_type and left:
            taken = min(left, reservation.count)
            left -= taken
            if taken == reservation.count:
                continue
            reservation = reservation.model_copy(update={"count": reservation.count - taken})
        kept.append(reservation)
    return env.model_copy(update={"capacity_reservations": tuple(kept)})


def reservation_plan(reservation: CapacityReservationSpec, catalogue: InstanceCatalogue, region: str) -> ReservationPlan:
    instance = catalogue.node_type(reservation.instance_type)
    on_demand = None if instance is None else instance.price(region)
    if reservation.usd_per_hour is not None:
        price, basis = reservation.usd_per_hour, "its own price (capacityReservations[].usdPerHour)"
    elif on_demand is not None:
        price, basis = on_demand, "the type's on-demand rate, as an ODCR is billed"
    else:
        price, basis = None, f"unknown: no on-demand price for {reservation.instance_type} in {region}"
    return ReservationPlan(id=reservation.reservation_id, kind=reservation.kind,  # type: ignore[arg-type]
                           instance_type=reservation.instance_type, zone=reservation.zone, count=reservation.count,
                           ends=reservation.ends, usd_per_hour=price, price_basis=basis)


def with_reservations(plan: FleetPlan, env: EnvironmentSpec, catalogue: InstanceCatalogue) -> FleetPlan:
    """Each group's reservations and the nodes they hold at desired; a warning for every reservation no group
    uses (paid for nothing) and every Capacity Block (it ends)."""
    reservations = [reservation_plan(r, catalogue, env.region) for r in env.capacity_reservations]
    groups, warnings = [], list(plan.warnings)
    for group in plan.node_groups:
        mine = tuple(r for r in reservations if r.instance_type == group.instance_type)
        held = min(group.desired_size, sum(r.count for r in mine))
        groups.append(group.model_copy(update={"reservations": mine, "reserved_nodes": held}))
    used = {g.instance_type for g in groups if g.reserved_nodes}
    for r in reservations:
        if r.instance_type not in used:
            warnings.append(Warning_(model=r.id, message=f"reservation {r.id} ({r.count} x {r.instance_type} in "
                                     f"{r.zone}) holds none of the plan's nodes: it is paid for nothing; place a model "
                                     "on its type (overrides.instance_type) or release it"))
        if r.kind == "capacity-block":
            warnings.append(Warning_(model=r.id, message=f"Capacity Block {r.id} ends on {r.ends}: its {r.count} "
                                     f"{r.instance_type} instances are reclaimed then, and their replicas move to "
                                     f"{env.capacity_type} capacity; extend it or buy the next block before then"))
    warnings += usage_warnings(reservations, plan.model_copy(update={"node_groups": tuple(groups)}), env)
    return plan.model_copy(update={"node_groups": tuple(groups),
                                   "warnings": tuple(sorted(warnings, key=lambda w: (w.model, w.message)))})


def usage_warnings(reservations: list[ReservationPlan], plan: FleetPlan, env: EnvironmentSpec) -> list[Warning_]:
    """Per reserved type the plan uses: a warning when its nodes at desired fill the reservations only partly
    (the rest paid for nothing), or need more than they hold (the rest launched on the stack's own capacity
    type and priced as such)."""
    out = []
    for instance_type in sorted({r.instance_type for r in reservations}):
        mine = [r for r in reservations if r.instance_type == instance_type]
        held, ids = sum(r.count for r in mine), ", ".join(r.id for r in mine)
        need = sum(g.desired_size for g in plan.node_groups if g.instance_type == instance_type)
        if 0 < need < held:
            out.append(Warning_(model=ids, message=f"reservation {ids} holds {held} x {instance_type}; the plan uses "
                                f"{need} at desired, so {held - need} reserved instance(s) are paid for nothing: "
                                "place more on the type (overrides.instance_type) or reserve fewer"))
        elif need > held:
            out.append(Warning_(model=ids, message=f"the plan needs {need} x {instance_type} at desired; reservation "
                                f"{ids} holds {held}: those are used first, and the other {need - held} run on "
                                f"{env.capacity_type} capacity, priced as such (reserve more to cover them)"))
    return out
