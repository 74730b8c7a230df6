"""Triton servers on a spot stack are ranked as the cost preview charges them: the nodes holding their
availability floors (two replicas or more) on-demand, the rest at spot (capacity/provisioning.py), as LLM
layouts are ranked (tests/plan/test_llm_ranking_price.py). Before, a GPU or CPU type was ranked at its spot
price for every node, so a type cheap on spot but dear on-demand won and the preview then charged its base
on-demand."""

from __future__ import annotations

import dataclasses
import re
from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelfleet.cost.fleet import compute_fleet_cost
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.hardware.node_price import HOURS_PER_MONTH
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.models import ClassicModelSpec, FleetSpec


def with_spot(catalogue, spot: dict[str, float]):
    """The table with these GPU or CPU types' us-east-1 spot prices replaced."""
    maps = {"instances": dict(catalogue.instances), "cpu_instances": dict(catalogue.cpu_instances)}
    for name, price in spot.items():
        types = maps["instances"] if name in maps["instances"] else maps["cpu_instances"]
        types[name] = dataclasses.replace(types[name], spot_usd_per_hour=MappingProxyType(
            {**types[name].spot_usd_per_hour, "us-east-1": price}))
    return dataclasses.replace(catalogue, **{k: MappingProxyType(v) for k, v in maps.items()})


def classic(name: str, availability: float, *, cpu: bool = False, peak_rps: float = 50.0) -> ClassicModelSpec:
    profile: dict = {"rps_per_instance": 500, "measured_on": "a10g", "compute_ms": 5.0}
    if cpu:
        profile["cpu"] = {"rps_per_instance": 400, "compute_ms": 5.0, "measured_on": "c7i", "vcpu_per_instance": 2}
    return ClassicModelSpec.model_validate({
        "name": name, "type": "tabular" if cpu else "vision", "framework": "onnx", "artifact": f"s3://bucket/{name}",
        "version": 1, **({"device": "cpu"} if cpu else {}),
        "size": {"memory_gib": 2.0}, "inputs": [{"name": "x", "dtype": "fp32", "dims": [16]}],
        "outputs": [{"name": "y", "dtype": "fp32", "dims": [1]}],
        "sla": {"p99_latency_ms": 100.0, "peak_rps": peak_rps, "availability": availability},
        "profile": profile})


def spot_env(families: tuple[str, ...]) -> EnvironmentSpec:
    return EnvironmentSpec.model_validate({"name": "prod", "region": "us-east-1", "capacity_type": "spot",
                                          "instance_families": families})


def usd_per_hour(reason: str) -> float:
    return float(re.search(r"= ([\d,.]+) USD/h", reason).group(1).replace(",", ""))


def test_a_floor_on_spot_is_ranked_on_demand_and_picks_the_type_cheapest_so(catalogue):
    """g6e.xlarge is made far cheaper on spot than g6.xlarge, but dearer on-demand: a two-replica floor holds
    both nodes on-demand, so g6.xlarge is the cheaper group, as the preview charges it."""
    table = with_spot(catalogue, {"g6e.xlarge": 0.2, "g6.xlarge": 0.5})
    env = spot_env(("g6", "g6e"))
    plan = compile_fleet(FleetSpec(models=(classic("a", 99.9),)), env, table)
    (group,) = plan.node_groups
    (server,) = plan.triton_servers
    assert server.min_replicas >= 2 and group.on_demand_base_nodes == group.desired_size
    assert group.instance_type == "g6.xlarge"
    assert f"{group.on_demand_base_nodes} of them on-demand" in server.decision.reason
    cost = compute_fleet_cost(plan, table, env, {})
    assert usd_per_hour(server.decision.reason) * HOURS_PER_MONTH == pytest.approx(  # the reason's 2 decimals
        cost.node_group(group.name).monthly_usd.desired, abs=0.005 * HOURS_PER_MONTH)
    # one replica needs no base: spot decides, and the cheap-on-spot type wins
    single = compile_fleet(FleetSpec(models=(classic("a", 99.0),)), env, table)
    assert [g.instance_type for g in single.node_groups] == ["g6e.xlarge"]
    assert "on-demand" not in single.triton_servers[0].decision.reason


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(availability=st.sampled_from((99.0, 99.9, 99.99)), cpu=st.booleans(), peak=st.sampled_from((50.0, 2000.0)),
       fractions=st.lists(st.floats(0.1, 1.0), min_size=4, max_size=4))
def test_every_triton_group_is_ranked_at_what_the_preview_charges_on_spot(catalogue, availability, cpu, peak,
                                                                          fractions):
    """Random spot tables, floors and loads: the chosen type's price in the plan is the preview's charge for
    its group (GPU or CPU servers, each group the servers' own)."""
    types = ["g6.xlarge", "g6e.xlarge", "c7i.xlarge", "c7i.2xlarge"]
    listed = {**catalogue.instances, **catalogue.cpu_instances}
    table = with_spot(catalogue, {t: round(listed[t].price("us-east-1") * f, 4) for t, f in zip(types, fractions)})
    env = spot_env(("g6", "g6e", "c7i"))
    plan = compile_fleet(FleetSpec(models=(classic("a", availability, cpu=cpu, peak_rps=peak),)), env, table)
    cost = compute_fleet_cost(plan, table, env, {})
    (server,) = plan.triton_servers
    group = plan.node_group(server.node_group)
    if group.root_volume_gib != env.deploy.node_disk_gib:
        return  # the ranking prices the stack's floor volume; a larger disk is priced by the preview only
    assert (group.on_demand_base_nodes > 0) == (server.min_replicas >= 2)
    assert usd_per_hour(server.decision.reason) * HOURS_PER_MONTH == pytest.approx(
        cost.node_group(group.name).monthly_usd.desired, abs=0.005 * HOURS_PER_MONTH)
