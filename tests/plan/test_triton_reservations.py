"""Triton GPU servers use a capacity reservation first and price it as reserved (issue 27), as LLM layouts do:
the packing ranks each type at the single ranking price (hardware/node_price.py ``ranking_usd_per_hour``), in
which a reserved node's instance-hour is paid already; the plan warns when a reservation is only partly used,
or when the plan needs more of the type than it holds (the rest on the stack's own capacity, said so)."""

from __future__ import annotations

import pytest

from modelfleet.cost.fleet import compute_fleet_cost
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.hardware.node_price import HOURS_PER_MONTH, ranking_usd_per_hour
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.models import ClassicModelSpec, FleetSpec

RESERVATION = "cr-0123456789abcdef0"
BASE = {"name": "prod", "region": "us-east-1", "instance_families": ("g5", "g6", "g6e")}


def classic(name: str, replicas: int | None = None) -> ClassicModelSpec:
    return ClassicModelSpec.model_validate({
        "name": name, "type": "vision", "framework": "onnx", "artifact": f"s3://bucket/{name}", "version": 1,
        "size": {"memory_gib": 2.0}, "inputs": [{"name": "x", "dtype": "fp32", "dims": [16]}],
        "outputs": [{"name": "y", "dtype": "fp32", "dims": [1]}],
        "sla": {"p99_latency_ms": 100.0, "peak_rps": 50.0, "availability": 99.0},
        "profile": {"rps_per_instance": 500, "measured_on": "a10g", "compute_ms": 5.0},
        "overrides": {"replicas": replicas} if replicas else {}})


def env_with(count: int | None, instance_type: str = "g6e.xlarge") -> EnvironmentSpec:
    reserved = [] if count is None else [{"id": RESERVATION, "instance_type": instance_type, "zone": "us-east-1a",
                                          "count": count}]
    return EnvironmentSpec.model_validate({**BASE, "capacity_reservations": reserved})


FLEET = FleetSpec(models=(classic("a"), classic("b")))


def test_triton_servers_go_to_a_reserved_type_first(catalogue):
    assert [g.instance_type for g in compile_fleet(FLEET, env_with(None), catalogue).node_groups] == ["g6.xlarge"]
    env = env_with(1)
    plan = compile_fleet(FLEET, env, catalogue)
    (group,) = plan.node_groups
    assert (group.instance_type, group.desired_size, group.reserved_nodes) == ("g6e.xlarge", 1, 1)
    (server,) = plan.triton_servers
    assert "a reserved node's instance-hour paid already" in server.decision.reason
    # priced as reserved: the group pays its volume only, the reservation its own cost, shown once
    cost = compute_fleet_cost(plan, catalogue, env, {})
    instance = catalogue.instances["g6e.xlarge"]
    assert cost.node_group(group.name).monthly_usd.desired == pytest.approx(
        ranking_usd_per_hour(catalogue, instance, env, 1, reserved=1) * HOURS_PER_MONTH, rel=1e-9)
    assert [r.id for r in cost.reservations] == [RESERVATION]
    assert cost.reservations[0].monthly_usd == pytest.approx(instance.price("us-east-1") * HOURS_PER_MONTH)
    assert not [w for w in plan.warnings if RESERVATION in w.model]


def test_a_partly_used_reservation_is_said(catalogue):
    plan = compile_fleet(FLEET, env_with(3), catalogue)
    (warning,) = [w for w in plan.warnings if w.model == RESERVATION]
    assert warning.message == (f"reservation {RESERVATION} holds 3 x g6e.xlarge; the plan uses 1 at desired, so 2 "
                               "reserved instance(s) are paid for nothing: place more on the type "
                               "(overrides.instance_type) or reserve fewer")


def test_more_than_the_reservation_holds_runs_on_normal_capacity_and_is_said(catalogue):
    """Three replicas on g6.xlarge, one of them reserved: the reserved node first, two more on-demand."""
    fleet = FleetSpec(models=(classic("a", replicas=3),))
    env = env_with(1, "g6.xlarge")
    plan = compile_fleet(fleet, env, catalogue)
    (group,) = plan.node_groups
    assert (group.instance_type, group.reserved_nodes) == ("g6.xlarge", 1) and group.desired_size == 3
    (warning,) = [w for w in plan.warnings if w.model == RESERVATION]
    assert warning.message == (f"the plan needs 3 x g6.xlarge at desired; reservation {RESERVATION} holds 1: "
                               "those are used first, and the other 2 run on on-demand capacity, priced as such "
                               "(reserve more to cover them)")
    cost = compute_fleet_cost(plan, catalogue, env, {})
    instance = catalogue.instances["g6.xlarge"]
    assert cost.node_group(group.name).monthly_usd.desired == pytest.approx(
        ranking_usd_per_hour(catalogue, instance, env, 3, reserved=1) * HOURS_PER_MONTH, rel=1e-9)
