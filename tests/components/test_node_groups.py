"""GPU node groups, their launch templates and the node role, as the program creates them under mocks."""

from __future__ import annotations

import pytest

from modelfleet.k8s import node_disk_gib
from tests.components.mocked import k8s_objects, of_type, run, stack_config
from tests.conftest import STACKS

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


@pytest.mark.parametrize("stack", STACKS)
def test_node_groups_match_the_plan(runs, plans, project, stack):
    groups, plan = of_type(runs[stack], NODE_GROUP), plans[stack]
    assert sorted(groups) == sorted(g.name for g in plan.node_groups)
    for planned in plan.node_groups:
        inputs = groups[planned.name].inputs
        assert inputs["instanceTypes"] == [planned.instance_type]
        assert inputs["scalingConfig"] == {"minSize": planned.min_size, "desiredSize": planned.desired_size,
                                           "maxSize": planned.max_size}
        assert inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
        assert inputs["capacityType"] == ("SPOT" if planned.capacity_type == "spot" else "ON_DEMAND")
        assert inputs["amiType"] == project.environment(stack).deploy.ami_type == "AL2023_x86_64_NVIDIA"
        assert inputs["labels"]["modelfleet.io/node-group"] == planned.name
        assert inputs["nodeGroupNamePrefix"] == f"{planned.name}-"  # replaced groups are created before deletion
        autoscaled = planned.max_size > planned.min_size
        assert groups[planned.name].ignore_changes == (("scalingConfig.desiredSize",) if autoscaled else ())


@pytest.mark.parametrize("stack", STACKS)
def test_launch_templates_enforce_imdsv2_and_size_the_disk(runs, plans, project, stack):
    templates, plan = of_type(runs[stack], LAUNCH_TEMPLATE), plans[stack]
    floor = project.environment(stack).deploy.node_disk_gib
    for group in plan.node_groups:
        inputs = templates[f"{group.name}-lt"].inputs
        assert inputs["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required",
                                             "httpPutResponseHopLimit": 1}
        (disk,) = inputs["blockDeviceMappings"]
        assert disk["deviceName"] == "/dev/xvda"
        assert disk["ebs"]["volumeSize"] == node_disk_gib(plan, group.name, floor) >= floor
        assert disk["ebs"]["encrypted"] == "true"


def test_disks_hold_what_the_pods_write(runs, plans):
    """A p5 node of the 405B model downloads the whole 756 GiB checkpoint into its emptyDir."""
    plan = plans["prod"]
    group = plan.model("llama-3-1-405b-instruct").node_group
    applied = k8s_objects(runs["prod"])[("LeaderWorkerSet", "llama-3-1-405b-instruct")]
    pod = applied["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    cache = next(v for v in pod["volumes"] if v["name"] == "hf-cache")["emptyDir"]["sizeLimit"]
    disk = of_type(runs["prod"], LAUNCH_TEMPLATE)[f"{group}-lt"].inputs["blockDeviceMappings"][0]["ebs"]["volumeSize"]
    assert int(cache.removesuffix("Gi")) >= plan.model("llama-3-1-405b-instruct").weights_gib
    assert disk >= int(cache.removesuffix("Gi")) + 40


def test_node_role_has_exactly_the_three_worker_policies(runs):
    attached = sorted(r.inputs["policyArn"] for r in of_type(runs["prod"], "aws:iam/rolePolicyAttachment:RolePolicyAttachment").values()
                      if r.name.startswith("gpu-nodes-"))
    assert attached == sorted(["arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
                               "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
                               "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"])
    role = of_type(runs["prod"], "aws:iam/role:Role")["gpu-nodes-role"]
    assert '"Service": "ec2.amazonaws.com"' in role.inputs["assumeRolePolicy"]


def test_al2023_gets_the_device_plugin_and_bottlerocket_does_not(runs, plans):
    assert ("DaemonSet", "nvidia-device-plugin") in k8s_objects(runs["prod"])
    bottlerocket = run("prod", config=stack_config("prod", **{"modelfleet:deploy": {
        "amiType": "BOTTLEROCKET_x86_64_NVIDIA", "modelRepositoryBucket": "acme-modelfleet-prod-model-repository"}}))
    assert ("DaemonSet", "nvidia-device-plugin") not in k8s_objects(bottlerocket)
    assert {r.inputs["amiType"] for r in of_type(bottlerocket, NODE_GROUP).values()} == {"BOTTLEROCKET_x86_64_NVIDIA"}
    devices = {t.inputs["blockDeviceMappings"][0]["deviceName"] for t in of_type(bottlerocket, LAUNCH_TEMPLATE).values()}
    assert devices == {"/dev/xvdb"}, "Bottlerocket keeps images and emptyDirs on its data volume"
