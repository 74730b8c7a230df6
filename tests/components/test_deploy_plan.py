"""The deploy plan's decisions, pure (no mocks): scaling against what runs, the cache disks and what
they allow, the token and endpoint checks."""

from __future__ import annotations

import pytest

from modelfleet.deploy import compile_deploy_plan
from modelfleet.deploy.checks import credential_issues
from modelfleet.deploy.node_groups import live_group, scaling
from modelfleet.deploy.types import LiveNodeGroup
from modelfleet.plan.capacity import disk
from modelfleet.project import Project
from tests.components.mocked import stack_config
from tests.conftest import ROOT


def live(name: str = "gpu-a-od-20260101", sizes=(2, 3, 5), stack: str = "prod", group: str = "gpu-a-od") -> LiveNodeGroup:
    low, desired, high = sizes
    return LiveNodeGroup(name=name, min_size=low, desired_size=desired, max_size=high, ami_type="AL2023_x86_64_NVIDIA",
                         capacity_type="ON_DEMAND", instance_types=("g6e.xlarge",), subnet_ids=(),
                         tags={"modelfleet.io/node-group": group, "modelfleet.io/stack": stack})


@pytest.mark.parametrize(("planned", "running", "expected"), [
    ((2, 3, 5), None, (3, True)),  # a new group starts at the planned size, then belongs to the autoscaler
    ((2, 3, 5), (2, 5, 5), (3, True)),  # same bounds: the live 5 is left alone (the sent 3 is ignored)
    ((4, 5, 8), (2, 3, 5), (4, False)),  # the reviewer's case: min 4 above the live 3
    ((1, 2, 3), (2, 5, 6), (3, False)),  # max 3 below the live 5
    ((2, 3, 8), (2, 5, 5), (5, False)),  # max grows: the live 5 is sent, nothing scales
    ((3, 3, 3), (2, 5, 5), (3, False)),  # a fixed size is always sent
])
def test_scaling_sends_a_desired_size_within_the_new_bounds(planned, running, expected):
    result = scaling(planned, None if running is None else live(sizes=running))
    assert (result.desired_size, result.ignore_desired) == expected
    assert result.min_size <= result.desired_size <= result.max_size
    assert bool(result.note) == (running is not None and not result.ignore_desired), "the preview says why"


def test_a_live_group_is_matched_by_prefix_stack_and_tag():
    ours = live()
    assert live_group("gpu-a-od", [ours], "prod") == ours
    assert live_group("gpu-a-od", [live(stack="staging")], "prod") is None
    assert live_group("gpu-a-od", [live(name="gpu-a-od-b-2026", group="gpu-a-od-b")], "prod") is None
    bigger = live(name="gpu-a-od-20260202", sizes=(2, 4, 5))
    assert live_group("gpu-a-od", [ours, bigger], "prod") == bigger, "mid-replacement: the larger is kept"


def test_disks_are_provisioned_where_nodes_download_a_lot():
    """Where pods download their checkpoint (here the 405B with ``deploy.stageHubWeights: false``), a gp3 volume
    gets its maximum throughput; streamed weights (s3:// or staged) land on no disk."""
    project = Project(root=str(ROOT))
    config = stack_config("prod")
    config["modelfleet:deploy"] = {**config["modelfleet:deploy"], "stageHubWeights": False}
    plan = project.deployment("prod", config).plan
    big = plan.model("llama-3-1-405b-instruct").node_group
    assert disk.node_download_gib(plan, big) >= disk.PROVISION_FROM_GIB
    assert (disk.throughput_mibps(plan, big), disk.iops(disk.throughput_mibps(plan, big))) == (1000, 4000)
    streamed = plan.model("llama-3-3-70b-instruct")  # s3:// through runai_streamer: nothing lands on disk
    assert disk.node_download_gib(plan, streamed.node_group) < disk.PROVISION_FROM_GIB
    assert disk.throughput_mibps(plan, streamed.node_group) == 125
    for group in plan.node_groups:
        assert disk.pod_download_gib_s(plan, group.name) <= min(0.5, disk.pod_disk_gib_s(plan, group.name))
    staged = project.plan("prod")
    assert disk.node_download_gib(staged, big) < disk.PROVISION_FROM_GIB


def test_the_token_stops_a_deploy_and_not_a_preview():
    project = Project(root=str(ROOT))
    fleet = compile_deploy_plan(project.deployment("prod", stack_config("prod")))
    assert credential_issues(fleet, True, False, "f") == ([], [])
    errors, warnings = credential_issues(fleet, False, True, "f")
    assert errors == [] and len(warnings) == 1
    errors, warnings = credential_issues(fleet, False, False, "f")
    assert warnings == [] and errors[0].path == "config.modelfleet:hfToken"
    assert "llama-3-1-405b-instruct" in errors[0].message and "llama-3-3-70b-instruct" not in errors[0].message


def test_the_deploy_plan_is_deterministic_and_names_only_keys_it_defines():
    project = Project(root=str(ROOT))
    fleet = compile_deploy_plan(project.deployment("prod", stack_config("prod")))
    assert fleet == compile_deploy_plan(project.deployment("prod", stack_config("prod")))
    defined = {f"object:{o.name}" for o in fleet.cluster_objects}
    defined |= {f"node-group:{g.plan_group or g.name}" for g in fleet.node_groups}  # a zonal group by its plan group
    defined |= {"bucket:model-repository"} if fleet.repository is not None else set()
    for workload in (*fleet.triton_servers, *fleet.vllm_models):
        defined |= {f"object:{o.name}" for o in workload.manifests} | {f"credentials:{workload.name}"}
    named = {k for w in (*fleet.triton_servers, *fleet.vllm_models) for o in w.manifests for k in o.waits_for}
    assert named and named <= defined

