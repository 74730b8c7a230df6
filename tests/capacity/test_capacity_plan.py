"""Spot as it is priced, capacity reservations used first and priced once, and scale to zero with its cold start."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.cli import main
from modelfleet.deploy import compile_deploy_plan
from modelfleet.errors import SpecError
from modelfleet.plan.capacity.reservations import billed_nodes, consume
from modelfleet.plan.hardware.node_price import HOURS_PER_MONTH
from modelfleet.plan.types import VllmModelPlan
from modelfleet.spec.environment import CapacityReservationSpec, parse_environment
from tests.capacity.fleets import BLOCK, SCALE_TO_ZERO, project_with, stack_config
from tests.hardening.judges import crd_errors

ODCR = {"id": "cr-0aaaabbbbccccdddd", "instanceType": "g6e.xlarge", "zone": "us-east-1a", "count": 1}


def costed(tmp_path, stack, changes):
    project = project_with(tmp_path, stack, changes)
    return project, project.plan_and_cost(stack)


# ------------------------------------------------------------------------------------------------ spot
@pytest.mark.parametrize("stack, changes", [("dev", {}), ("prod", {"modelfleet:capacityType": "spot"})])
def test_spot_costs_come_from_the_dated_table_with_a_range(tmp_path, stack, changes):
    project, (_, cost) = costed(tmp_path, stack, changes)
    catalogue = project.catalogue()
    assert not any("ASSUMED" in line for line in cost.price_basis)
    assert any(line.startswith("spot us-east-1: ") and "as of 2026-11-28" in line for line in cost.price_basis)
    for group in cost.node_groups:
        spot = catalogue.node_type(group.instance_type).spot_price("us-east-1")
        assert group.price_basis == "spot (dated table)" and group.usd_per_node_hour == spot
        low, high = group.monthly_range_usd
        assert low <= cost.node_group(group.name).monthly_usd.desired + 1e-6 <= high + 1e-6
        on_demand = catalogue.node_type(group.instance_type).price("us-east-1")
        assert high == pytest.approx(group.nodes[1] * (on_demand * HOURS_PER_MONTH + group.volume_usd_per_node_month),
                                     abs=0.01)


def test_availability_floors_keep_an_on_demand_base(tmp_path):
    """prod on spot: every floor is two or more replicas in different zones, so it is held on on-demand nodes, and
    the plan says how many replicas; the base is priced on-demand, the rest on spot."""
    project, (plan, cost) = costed(tmp_path, "prod", {"modelfleet:capacityType": "spot"})
    catalogue = project.catalogue()
    for model in plan.models:
        if isinstance(model, VllmModelPlan):
            assert model.on_demand_base_replicas == model.min_replicas >= 2
    for group in plan.node_groups:
        priced = cost.node_group(group.name)
        instance = catalogue.node_type(group.instance_type)
        base, rest = group.on_demand_base_nodes, group.desired_size - group.on_demand_base_nodes
        expected = (base * instance.price("us-east-1") + rest * instance.spot_price("us-east-1")) * HOURS_PER_MONTH
        assert priced.monthly_usd.desired == pytest.approx(expected + group.desired_size * priced.volume_usd_per_node_month)


def test_a_stack_without_dated_spot_prices_is_unknown_unless_it_states_a_ratio(project_env):
    from modelfleet.cost.fleet import compute_fleet_cost
    from modelfleet.project import Project
    from tests.conftest import ROOT

    project = Project(root=str(ROOT))
    plan, elsewhere = project.plan("dev"), project_env.model_copy(update={"region": "eu-west-1"})
    cost = compute_fleet_cost(plan, project.catalogue(), elsewhere, {})
    assert cost.monthly_usd is None and any("no spot price for eu-west-1" in u for u in cost.unknown)
    stated = elsewhere.model_copy(update={"cost": elsewhere.cost.model_copy(update={"spot_price_ratio": 0.5})})
    assert all("no on-demand price" in g.price_basis or "no spot" in g.price_basis
               for g in compute_fleet_cost(plan, project.catalogue(), stated, {}).node_groups)


# ------------------------------------------------------------------------------------------------ reservations
def test_a_reservation_is_used_first_and_priced_as_reserved(tmp_path):
    """dev with one reserved g6e.xlarge: the 8B model, on g5.xlarge without it, goes to the reserved node (zero
    marginal cost); its group charges that node's volume only, and the reservation is priced once."""
    project, (plan, cost) = costed(tmp_path, "dev", {"modelfleet:capacityReservations": [ODCR]})
    llama = plan.model("llama-3-1-8b-instruct")
    assert llama.instance_type == "g6e.xlarge"
    group = plan.node_group(llama.node_group)
    assert group.reserved_nodes == 1 and group.reservations[0].id == ODCR["id"]
    priced = cost.node_group(group.name)
    billed = group.desired_size - 1
    assert priced.monthly_usd.desired == pytest.approx(
        billed * priced.usd_per_node_hour * HOURS_PER_MONTH + group.desired_size * priced.volume_usd_per_node_month)
    (reservation,) = cost.reservations
    on_demand = project.catalogue().instances["g6e.xlarge"].price("us-east-1")
    assert reservation.monthly_usd == pytest.approx(on_demand * HOURS_PER_MONTH) and reservation.used_nodes == 1
    groups = sum(g.monthly_usd.desired for g in cost.node_groups)
    assert cost.monthly_usd.desired == pytest.approx(groups + reservation.monthly_usd)


def test_the_largest_model_gets_the_reserved_node_and_no_node_is_free_twice(tmp_path):
    """One reserved g6e.12xlarge in dev: the 70B (the largest weights) takes it; the 8B, which would also fit
    there, sees no free node left and stays where it is cheapest."""
    reserved = dict(ODCR, instanceType="g6e.12xlarge")
    changes = {"modelfleet:capacityReservations": [reserved], "modelfleet:budget": {"monthlyUsd": 100000}}
    _, (plan, cost) = costed(tmp_path, "dev", changes)
    group = plan.node_group(plan.model("llama-3-3-70b-instruct").node_group)
    assert group.instance_type == "g6e.12xlarge" and group.reserved_nodes == 1
    assert plan.model("llama-3-1-8b-instruct").instance_type != "g6e.12xlarge"
    assert cost.reservations[0].used_nodes == 1


def test_a_capacity_block_warns_with_its_end_and_keeps_its_zone(tmp_path):
    project, (plan, _) = costed(tmp_path, "dev", {"modelfleet:capacityReservations": [BLOCK]})
    assert any(w.model == BLOCK["capacityBlockId"] and "ends on 2026-12-15" in w.message for w in plan.warnings)
    changes = {"modelfleet:capacityReservations": [BLOCK]}
    fleet = compile_deploy_plan(project.deployment("dev", stack_config("dev", **changes)))
    reserved = [g for g in fleet.node_groups if g.launch_template.capacity_reservation_id == BLOCK["capacityBlockId"]]
    assert [(g.capacity_type, g.launch_template.capacity_block) for g in reserved] == [("CAPACITY_BLOCK", True)]


def test_an_unused_reservation_is_still_paid_and_said(tmp_path):
    unused = dict(ODCR, instanceType="p5.48xlarge")  # not among dev's families: nothing can use it
    changes = {"modelfleet:capacityReservations": [unused], "modelfleet:budget": {"monthlyUsd": 100000}}
    _, (plan, cost) = costed(tmp_path, "dev", changes)
    assert any("paid for nothing" in w.message for w in plan.warnings)
    assert cost.reservations[0].used_nodes == 0 and cost.reservations[0].monthly_usd > 0


def test_bad_reservations_are_located_errors(tmp_path):
    text = yaml.safe_dump({"config": {"aws:region": "us-east-1", "modelfleet:capacityReservations": [
        {"id": "cr-1", "instanceType": "g6e.xlarge", "zone": "eu-west-1a", "count": 1},
        {"capacityBlockId": "cr-2", "instanceType": "p5.48xlarge", "zone": "us-east-1a", "count": 2}]}})
    path = tmp_path / "Pulumi.dev.yaml"
    path.write_text(text)
    from modelfleet.spec.yaml_source import load_yaml
    doc = load_yaml(str(path))
    with pytest.raises(SpecError) as error:
        parse_environment("dev", doc.data["config"], doc, families=["g6e", "p5"])
    messages = "\n".join(map(str, error.value.issues))
    assert "capacityReservations[1].ends: a Capacity Block ends" in messages


reservations = st.lists(st.tuples(st.sampled_from(["g5.xlarge", "g6e.xlarge"]), st.integers(1, 5)), max_size=4)


@settings(max_examples=60, deadline=None)
@given(reservations, st.sampled_from(["g5.xlarge", "g6e.xlarge"]), st.integers(0, 12))
def test_consuming_reservations_never_frees_more_than_was_reserved(project_env, listed, instance_type, nodes):
    env = project_env.model_copy(update={"capacity_reservations": tuple(
        CapacityReservationSpec(id=f"cr-{i}", instance_type=t, zone="us-east-1a", count=n) for i, (t, n) in enumerate(listed))})
    reserved = sum(n for t, n in listed if t == instance_type)
    assert billed_nodes(env, instance_type, nodes) == max(0, nodes - reserved)
    left = consume(env, instance_type, nodes)
    assert sum(r.count for r in left.capacity_reservations if r.instance_type == instance_type) == max(0, reserved - nodes)
    assert [r for r in left.capacity_reservations if r.instance_type != instance_type] == [
        r for r in env.capacity_reservations if r.instance_type != instance_type]


@pytest.fixture(scope="module")
def project_env():
    from modelfleet.project import Project
    from tests.conftest import ROOT
    return Project(root=str(ROOT)).environment("dev")


# ------------------------------------------------------------------------------------------------ scale to zero
def test_scale_to_zero_renders_a_valid_scaled_object_and_states_its_cold_start(tmp_path):
    project = project_with(tmp_path, "dev", SCALE_TO_ZERO)
    plan, files = project.rendered("dev")
    objects = [o for name, text in sorted(files.items()) if name.startswith("kubernetes/")
               for o in yaml.safe_load_all(text) if o]
    scaled = [o for o in objects if o["kind"] == "ScaledObject"]
    workloads = [*plan.triton_servers, *(m for m in plan.models if isinstance(m, VllmModelPlan))]
    assert len(scaled) == len(workloads) and not [o for o in objects if o["kind"] == "HorizontalPodAutoscaler"]
    for obj in scaled:
        assert crd_errors(obj) == [] and obj["spec"]["minReplicaCount"] == 0
        assert all(t["metadata"]["activationThreshold"] == "0" for t in obj["spec"]["triggers"])
    for workload in workloads:
        cold = workload.cold_start
        assert workload.min_replicas == 0 and cold is not None
        assert cold.total_s == (cold.node_launch_s + cold.image_pull_s + cold.weights_s + cold.engine_start_s
                                + -(-int(cold.first_request_ms) // 1000))
    assert all(g.min_size == 0 for g in plan.node_groups)


def test_high_availability_floors_never_scale_to_zero(tmp_path):
    project = project_with(tmp_path, "prod", {"modelfleet:replicas": {"maxScaleFactor": 1.5, "minimum": 0}})
    plan = project.plan("prod")
    base = project_with(tmp_path / "base" if (tmp_path / "base").mkdir() is None else tmp_path, "prod", {}).plan("prod")
    for workload in [*plan.triton_servers, *(m for m in plan.models if isinstance(m, VllmModelPlan))]:
        before = (base.server(workload.name) if hasattr(workload, "models") and not isinstance(workload, VllmModelPlan)
                  else base.model(workload.name))
        assert workload.min_replicas == (0 if before.min_replicas == 1 else before.min_replicas)


def test_the_cost_preview_shows_the_idle_saving(tmp_path, capsys):
    project_with(tmp_path, "dev", SCALE_TO_ZERO)
    assert main(["--project", str(tmp_path), "cost", "--stack", "dev"]) == 0
    out = capsys.readouterr().out
    assert "scale to zero: idle, its workloads hold no node; saves" in out
    _, cost = project_with(tmp_path / "c" if (tmp_path / "c").mkdir() is None else tmp_path, "dev",
                           SCALE_TO_ZERO).plan_and_cost("dev")
    assert cost.monthly_usd.min < cost.monthly_usd.desired and cost.idle_saving_usd_per_hour > 0


def test_the_plan_states_each_cold_start_and_the_karpenter_pools(tmp_path, capsys):
    project = project_with(tmp_path, "dev", SCALE_TO_ZERO | {"modelfleet:nodes": {"provisioner": "karpenter"}})
    plan = project.plan("dev")
    assert main(["--project", str(tmp_path), "plan", "--stack", "dev"]) == 0
    out = capsys.readouterr().out
    for model in (m for m in plan.models if isinstance(m, VllmModelPlan)):
        c = model.cold_start
        assert (f"scales to zero; a cold start takes {c.total_s} s: node launch {c.node_launch_s} s, image "
                f"{c.image_pull_s} s, weights {c.weights_s} s, engine start {c.engine_start_s} s") in out
    for group in plan.node_groups:
        assert f"Karpenter NodePool: {', '.join(group.allowed_types)} (cost order, each fit-checked)" in out


def test_managed_spot_groups_keep_the_floor_on_on_demand_groups(tmp_path):
    from modelfleet.deploy.types import LiveCluster, LiveSubnet

    changes = {"modelfleet:capacityType": "spot"}
    project = project_with(tmp_path, "prod", changes)
    deployment = project.deployment("prod", stack_config("prod", **changes))
    subnets = tuple(LiveSubnet(id=f"subnet-{i}", zone=f"us-east-1{z}") for i, z in enumerate("abc"))
    fleet = compile_deploy_plan(deployment, cluster=LiveCluster(kubernetes_version="1.33", subnets=subnets))
    groups = {g.name: g for g in fleet.node_groups}
    for group in deployment.plan.node_groups:
        base = [g for g in groups.values() if g.plan_group == group.name and g.capacity_type == "ON_DEMAND"]
        assert sum(g.scaling.desired_size for g in base) == group.on_demand_base_nodes > 0
        assert all(g.scaling.min_size == g.scaling.max_size for g in base)  # always up
        spot = [g for g in groups.values() if g.capacity_type == "SPOT" and (g.plan_group or g.name) == group.name]
        # with the base, the group still reaches its max (HPA max plus surge)
        assert sum(g.scaling.max_size for g in spot) + group.on_demand_base_nodes >= group.max_size
        if group.zonal:  # a multi-node replica's floor: whole replicas per zone, on that zone's subnets only
            assert all(g.zone and len(g.subnet_ids) == 1 for g in base)
    for model in fleet.vllm_models:
        workload = next(o.manifest for o in model.manifests if o.manifest["kind"] in ("Deployment", "LeaderWorkerSet", "Rollout"))
        spec = workload["spec"].get("template") or workload["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
        assert set(spec["spec"]["nodeSelector"]) == {"modelfleet.io/node-group"}
