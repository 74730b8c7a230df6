"""Karpenter, reservations and scale to zero on fleets nobody wrote (issue 27, "all of this holds on fleets you
were not given"): the generated fleets of tests/cost/fleets.py, on stacks whose capacity settings are drawn too.

- a Karpenter stack's NodePools and EC2NodeClasses validate against the real CRDs, every type a pool may
  launch passes the fit check, and a multi-node replica's pods share a zone;
- a reservation of a type the plan chose is used first (the type stays chosen, its nodes are reserved ones)
  and priced as reserved: the cost preview charges the group what the plan's ranking price says (hardware/
  node_price.py), and shows the reservation's own cost once;
- a stack at a minimum of 0 replicas renders a KEDA ScaledObject (valid against the real CRD, min 0) for every
  workload that scales to zero, and the plan states its cold start.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from modelfleet.cost.fleet import compute_fleet_cost, estimate_llm_loads
from modelfleet.deploy import Deployment, compile_deploy_plan
from modelfleet.errors import CompileError
from modelfleet.plan.capacity.provisioning import variant_fits
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.hardware.node_price import HOURS_PER_MONTH, ranking_usd_per_hour
from modelfleet.plan.types import VllmModelPlan
from modelfleet.render.fleet import render_fleet
from modelfleet.render.manifests import render_fleet_manifests
from modelfleet.spec.models import FleetSpec
from tests.cost.fleets import ENVIRONMENTS, capacity_environments, fleets, summary, with_capacity
from tests.hardening.judges import crd_errors

EXAMPLES = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                          HealthCheck.too_slow])


def compiled(models: list, env, catalogue):
    """The plan and its cost preview, or None when the fleet cannot be placed (a located error, never a crash)."""
    fleet = FleetSpec(models=tuple(models))
    try:
        plan = compile_fleet(fleet, env, catalogue)
    except CompileError as error:
        assert all(i.path for i in error.issues), [str(i) for i in error.issues]
        event("not placeable: a located error")
        return None
    event("placed")
    return plan, compute_fleet_cost(plan, catalogue, env, estimate_llm_loads(fleet, env.name))


def deployment(plan, cost, env) -> Deployment:
    files = render_fleet(plan, cost=cost)
    return Deployment(env, plan, cost, files, render_fleet_manifests(plan, env.deploy, files, cost=cost))


@EXAMPLES
@given(models=fleets(max_models=4), env=capacity_environments(provisioner="karpenter"))
def test_karpenter_stacks_validate_fit_and_keep_replicas_in_one_zone(catalogue, models, env):
    done = compiled(models, env, catalogue)
    if done is None:
        return
    plan, cost = done
    fleet = compile_deploy_plan(deployment(plan, cost, env))
    assert fleet.karpenter is not None and not fleet.node_groups
    objects = [o.manifest for o in fleet.karpenter.objects]
    kinds = {o["kind"] for o in objects}
    assert {"NodePool", "EC2NodeClass"} <= kinds, kinds
    for obj in objects:
        if obj["kind"] in ("NodePool", "EC2NodeClass"):
            assert crd_errors(obj) == [], (obj["metadata"]["name"], [summary(m) for m in models])
    for group in plan.node_groups:
        for name in group.allowed_types[1:]:
            assert variant_fits(plan, group, catalogue.instances[name], env, catalogue), (group.name, name)
    manifests = deployment(plan, cost, env).manifests
    for model in plan.models:
        if isinstance(model, VllmModelPlan) and model.nodes_per_replica > 1:
            lws = next(o for o in manifests[model.name] if o["kind"] == "LeaderWorkerSet")
            template = lws["spec"]["leaderWorkerTemplate"]
            for pod in (template["leaderTemplate"], template["workerTemplate"]):
                terms = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
                assert [t["topologyKey"] for t in terms] == ["topology.kubernetes.io/zone"]


@EXAMPLES
@given(models=fleets(max_models=4), base=st.sampled_from([e for e in ENVIRONMENTS if e.capacity_type == "on-demand"]),
       provisioner=st.sampled_from(["managed", "karpenter"]), count=st.integers(1, 3), block=st.booleans())
def test_a_reservation_of_a_chosen_type_is_used_first_and_priced_as_reserved(catalogue, models, base, provisioner,
                                                                             count, block):
    """On-demand stacks (a spot stack's on-demand base is priced apart: tests/plan/test_llm_ranking_price.py)."""
    env = with_capacity(base, provisioner=provisioner)
    done = compiled(models, env, catalogue)
    if done is None or not [g for g in done[0].node_groups if g.instance_type in catalogue.instances]:
        return
    group = next(g for g in done[0].node_groups if g.instance_type in catalogue.instances)  # a GPU type chosen
    ident = ({"capacity_block_id": "cr-00000000000000001", "ends": "2027-01-31", "usd_per_hour": 1.5} if block
             else {"id": "cr-00000000000000001"})
    reserved = with_capacity(env, provisioner=provisioner, reserved=[
        {"instance_type": group.instance_type, "zone": "us-east-1a", "count": count, **ident}])
    plan, cost = compiled(models, reserved, catalogue)  # a cheaper choice never makes a fleet unplaceable
    mine = [g for g in plan.node_groups if g.instance_type == group.instance_type]
    assert mine, f"{group.instance_type} reserved but no longer chosen: {[summary(m) for m in models]}"
    instance = catalogue.instances[group.instance_type]
    desired = sum(g.desired_size for g in mine)
    assert sum(g.reserved_nodes for g in mine) == min(desired, count)
    for g in mine:  # every group of the type: the plan's ranking price is what the preview charges it
        ranking = ranking_usd_per_hour(catalogue, instance, reserved, g.desired_size, reserved=g.reserved_nodes)
        if g.root_volume_gib == reserved.deploy.node_disk_gib:
            assert cost.node_group(g.name).monthly_usd.desired == pytest.approx(ranking * HOURS_PER_MONTH, rel=1e-9)
    shown = [r for r in cost.reservations if r.id == "cr-00000000000000001"]
    assert len(shown) == 1 and shown[0].monthly_usd == pytest.approx(
        count * (1.5 if block else instance.price("us-east-1")) * HOURS_PER_MONTH)
    said = " ".join(w.message for w in plan.warnings)
    assert (f"the other {desired - count} run on on-demand capacity" in said) == (desired > count)
    assert (f"{count - desired} reserved instance(s) are paid for nothing" in said) == (0 < desired < count)
    for server in plan.triton_servers:  # Triton's choice says it priced the reservation
        if server.instance_type == group.instance_type:
            reason = server.decision.reason
            assert "reserved node's instance-hour paid already" in reason, reason


@EXAMPLES
@given(models=fleets(max_models=4), env=capacity_environments(minimum=0, reserve=False))
def test_a_minimum_0_stack_renders_a_valid_scaled_object_and_states_its_cold_start(catalogue, models, env):
    done = compiled(models, env, catalogue)
    if done is None:
        return
    plan, cost = done
    manifests = deployment(plan, cost, env).manifests
    workloads = [*plan.triton_servers, *(m for m in plan.models if isinstance(m, VllmModelPlan))]
    for workload in workloads:
        scaled = [o for o in manifests.get(workload.name, []) if o["kind"] == "ScaledObject"]
        if workload.min_replicas == 0:
            assert workload.cold_start is not None and workload.cold_start.total_s > 0 and workload.cold_start.basis
            assert len(scaled) == 1 and crd_errors(scaled[0]) == [], scaled
            assert scaled[0]["spec"]["minReplicaCount"] == 0
            assert not [o for o in manifests[workload.name] if o["kind"] == "HorizontalPodAutoscaler"]
        else:
            assert workload.cold_start is None and not scaled
    floors_of_one = [w for w in workloads if not w.spread_zones]
    assert all(w.min_replicas == 0 for w in floors_of_one), [summary(m) for m in models]
