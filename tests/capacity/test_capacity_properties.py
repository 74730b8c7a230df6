"""Capacity settings the examples were not written for, generated: whatever the provisioner, capacity type,
reservations and scale-to-zero setting, every NodePool, EC2NodeClass and ScaledObject validates against the real
CRDs, every allowed type passes the fit check, no reserved node is counted twice, multi-node replicas keep to one
zone, and the cost adds up (groups plus reservations)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelfleet.deploy import compile_deploy_plan
from modelfleet.errors import CompileError
from modelfleet.plan.capacity.provisioning import variant_fits
from modelfleet.plan.types import VllmModelPlan
from tests.capacity.fleets import project_with, stack_config
from tests.hardening.judges import crd_errors

TYPES = ("g5.xlarge", "g5.12xlarge", "g6e.xlarge", "g6e.12xlarge", "g6e.24xlarge", "g4dn.12xlarge")
reservation = st.fixed_dictionaries({
    "instanceType": st.sampled_from(TYPES), "zone": st.sampled_from(["us-east-1a", "us-east-1b"]),
    "count": st.integers(1, 3)}, optional={"ends": st.just("2027-01-31")})
settings_ = st.fixed_dictionaries({
    "provisioner": st.sampled_from(["managed", "karpenter"]), "capacity": st.sampled_from(["spot", "on-demand"]),
    "minimum": st.booleans(), "reservations": st.lists(reservation, max_size=2)})


def changes_for(drawn: dict) -> dict:
    reservations = [dict(r, **({"capacityBlockId": f"cr-{i:017x}"} if "ends" in r else {"id": f"cr-{i:017x}"}))
                    for i, r in enumerate(drawn["reservations"], 1)]
    replicas = {"singleReplica": True, **({"minimum": 0} if drawn["minimum"] else {})}
    return {"modelfleet:nodes": {"provisioner": drawn["provisioner"]}, "modelfleet:capacityType": drawn["capacity"],
            "modelfleet:replicas": replicas, "modelfleet:capacityReservations": reservations,
            "modelfleet:budget": {"monthlyUsd": 1_000_000}, "modelfleet:policies": {"maxGpusPerModel": 8}}


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(settings_)
def test_any_capacity_settings_give_valid_objects_and_honest_costs(drawn):
    changes = changes_for(drawn)
    project = project_with(Path(tempfile.mkdtemp()), "dev", changes)
    try:
        deployment = project.deployment("dev", stack_config("dev", **changes))
    except CompileError as error:  # a setting the fleet cannot meet is a located error, never a crash
        assert all(i.path for i in error.issues)
        return
    plan, cost, catalogue = deployment.plan, deployment.cost, project.catalogue()
    fleet = compile_deploy_plan(deployment)
    objects = [o.manifest for o in (fleet.karpenter.objects if fleet.karpenter else ())]
    objects += [o.manifest for w in (*fleet.triton_servers, *fleet.vllm_models) for o in w.manifests
                if o.manifest["kind"] == "ScaledObject"]
    assert all(crd_errors(o) == [] for o in objects)
    assert (fleet.karpenter is not None) == (drawn["provisioner"] == "karpenter")
    for group in plan.node_groups:
        for name in group.allowed_types[1:]:
            assert variant_fits(plan, group, catalogue.instances[name], deployment.env, catalogue)
        assert group.reserved_nodes <= min(group.desired_size, sum(r.count for r in group.reservations))
        assert group.min_size == 0 or not drawn["minimum"]  # dev: single replica, every floor is one
    for model in plan.models:
        if isinstance(model, VllmModelPlan):
            assert (model.cold_start is not None) == drawn["minimum"]
            if model.nodes_per_replica > 1:  # the LWS's pods share a zone
                assert plan.node_group(model.node_group).zonal or drawn["provisioner"] == "karpenter"
    if cost.monthly_usd is not None:
        groups = sum(g.monthly_usd.desired for g in cost.node_groups)
        assert cost.monthly_usd.desired == pytest.approx(groups + sum(r.monthly_usd for r in cost.reservations))
    for group in cost.node_groups:
        if group.monthly_range_usd is not None:
            low, high = group.monthly_range_usd
            assert low <= group.monthly_usd.desired + 1e-6 <= high + 1e-6
