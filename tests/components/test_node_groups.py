"""GPU node groups, their launch templates and the node role, as the program creates them under mocks."""

from __future__ import annotations

import pytest

from modelfleet.plan.disk import GP3_MAX_MIBPS, pod_disk_gib_s
from modelfleet.plan.node_volume import node_disk_gib
from modelfleet.render.k8s.vllm import startup_s
from tests.components.mocked import copy_project, example_models, k8s_objects, live_group, of_type, run, stack_config
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
        assert inputs["tags"] == {**inputs["labels"], "modelfleet.io/stack": stack}
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
        volume = group.root_volume
        assert disk["ebs"]["volumeSize"] == volume.size_gib == node_disk_gib(plan, group.name, floor) >= floor
        assert (disk["ebs"]["volumeType"], disk["ebs"]["throughput"], disk["ebs"]["iops"]) == (
            "gp3", volume.throughput_mibps, volume.iops)
        assert 125 <= volume.throughput_mibps <= GP3_MAX_MIBPS and volume.iops >= max(3000, 4 * volume.throughput_mibps)
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


def test_the_405b_model_cold_starts_within_its_probe_budget(runs, plans):
    """Each p5 node downloads the whole 756 GiB checkpoint into its emptyDir. At gp3's baseline 125 MiB/s
    that alone takes 103 minutes, past any budget, and the LWS recreated the group forever; the group's
    volume is provisioned at gp3's maximum, and the probes give the download (at the network rate or the
    disk's, the slower) and the read-back of the node's pipeline stage."""
    plan = plans["prod"]
    model = plan.model("llama-3-1-405b-instruct")
    ebs = of_type(runs["prod"], LAUNCH_TEMPLATE)[f"{model.node_group}-lt"].inputs["blockDeviceMappings"][0]["ebs"]
    assert (ebs["throughput"], ebs["iops"]) == (1000, 4000)
    lws = k8s_objects(runs["prod"])[("LeaderWorkerSet", model.name)]["spec"]["leaderWorkerTemplate"]
    disk_gib_s = ebs["throughput"] / 1024
    assert disk_gib_s == pod_disk_gib_s(plan, model.node_group)  # one pod per p5 node: all of the volume
    needed_s = 300 + model.weights_gib / min(0.5, disk_gib_s) + model.weights_gib / 2 / disk_gib_s
    for role in ("leaderTemplate", "workerTemplate"):
        probe = lws[role]["spec"]["containers"][0]["startupProbe"]
        assert probe["periodSeconds"] * probe["failureThreshold"] >= needed_s >= 300 + model.weights_gib / 0.5
    assert model.weights_gib * 1024 / 125 > startup_s(model, plan), "the baseline disk could never have made it"


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


def _desired(result, group: str) -> tuple[int, tuple[str, ...]]:
    node_group = of_type(result, NODE_GROUP)[group]
    return node_group.inputs["scalingConfig"]["desiredSize"], node_group.ignore_changes


@pytest.mark.parametrize("case", ["same bounds", "min above live", "max moved", "max below live"])
def test_a_scaling_update_is_one_eks_accepts(plans, case):
    """The 8B model's group (planned lo/d/hi) against what runs. Ignoring the desired size makes the provider
    send the one from the last deploy with the new bounds, which EKS rejects when min is above it
    (terraform-aws-eks #748)."""
    group = plans["prod"].node_group(plans["prod"].model("llama-3-1-8b-instruct").node_group)
    lo, d, hi = group.min_size, group.desired_size, group.max_size
    assert lo >= 2 and hi >= d + 1
    live, sent, ignored = {
        "same bounds": ((lo, d + 1, hi), d, True),  # the autoscaler's d+1 stays: the planned d is not sent
        "min above live": ((lo - 1, lo - 1, hi), lo, False),  # EKS needs desired >= min
        "max moved": ((lo, d + 1, hi + 1), d + 1, False),  # the live size is sent with the new bounds, unchanged
        "max below live": ((lo, hi + 2, hi + 3), hi, False),
    }[case]
    result = run("prod", live=[live_group(group.name, "prod", live)])
    assert _desired(result, group.name) == (sent, ("scalingConfig.desiredSize",) if ignored else ())
    notes = [text for level, text in result.messages if level == "info" and group.name in text]
    assert bool(notes) == (not ignored)


def test_adding_an_llm_raises_min_past_the_live_desired_size(plans, tmp_path):
    """The reviewer's case: a new LLM takes g6e.xlarge from 2/3/5 to 4/5/8 while 3 nodes run."""
    group = plans["prod"].node_group(plans["prod"].model("llama-3-1-8b-instruct").node_group)
    running = (group.min_size, group.desired_size, group.max_size)
    models = example_models()
    extra = dict(next(m for m in models["models"] if m["name"] == "llama-3-1-8b-instruct"), name="qwen-7b-chat",
                 architecture="qwen2.5-7b", artifact="Qwen/Qwen2.5-7B-Instruct")
    models["models"].append(extra)
    result = run("prod", copy_project(tmp_path, models), live=[live_group(group.name, "prod", running)])
    scaling = of_type(result, NODE_GROUP)[group.name].inputs["scalingConfig"]
    assert scaling["minSize"] > group.desired_size and scaling["desiredSize"] == scaling["minSize"]
    assert of_type(result, NODE_GROUP)[group.name].ignore_changes == ()


def test_another_stacks_groups_are_not_this_stacks(plans):
    group = plans["prod"].node_group(plans["prod"].model("llama-3-1-8b-instruct").node_group)
    result = run("prod", live=[live_group(group.name, "staging", (1, 1, 9))])
    assert _desired(result, group.name) == (group.desired_size, ("scalingConfig.desiredSize",))


def test_protected_groups_a_deploy_would_replace_or_delete_are_named_with_their_urn(runs, plans, project):
    group = plans["prod"].model("llama-3-1-8b-instruct").node_group
    live = [live_group("gpu-a1-2xlarge-od", "prod", (1, 1, 2), instance_type="a1.2xlarge"),
            live_group(group, "prod", (2, 3, 5), amiType="BOTTLEROCKET_x86_64_NVIDIA",
                       instanceTypes=[plans["prod"].node_group(group).instance_type],
                       subnetIds=list(reversed(project.environment("prod").cluster.subnet_ids)))]
    result = run("prod", live=live)
    warnings = [text for level, text in result.messages if level == "warning" and "protected node group" in text]
    # The SDK's mock monitor writes "stack" and "project" into URNs (it answers outside the program's context).
    urn = of_type(result, NODE_GROUP)[group].urn.replace("urn:pulumi:stack::project::", "urn:pulumi:prod::modelfleet::")
    assert len(warnings) == 2
    assert "gpu-a1-2xlarge-od (gpu-a1-2xlarge-od-2026" in warnings[0] and "would be deleted" in warnings[0]
    assert f"pulumi state unprotect '{urn.replace(group, 'gpu-a1-2xlarge-od')}'" in warnings[0]
    assert "would be replaced (AMI type BOTTLEROCKET_x86_64_NVIDIA -> AL2023_x86_64_NVIDIA):" in warnings[1]
    assert f"pulumi state unprotect '{urn}'" in warnings[1]
    assert not [t for _, t in run("dev", live=[live_group("gpu-a1-2xlarge-od", "dev", (1, 1, 2))]).messages
                if "protected node group" in t], "dev protects nothing"


def test_node_groups_go_to_the_stacks_private_subnets_or_say_where_they_go(runs, project):
    """Without cluster.subnetIds the groups get the control plane's subnets, public ones included if it has any."""
    prod = project.environment("prod").cluster.subnet_ids
    assert prod and all(g.inputs["subnetIds"] == list(prod) for g in of_type(runs["prod"], NODE_GROUP).values())
    assert not any("control plane" in text for _, text in runs["prod"].messages)
    looked_up = ["subnet-0private0a", "subnet-0private0b", "subnet-0private0c"]  # what the mocked cluster reports
    assert all(g.inputs["subnetIds"] == looked_up for g in of_type(runs["dev"], NODE_GROUP).values())
    assert any(level == "warning" and "set modelfleet:cluster.subnetIds to its private subnets" in text
               for level, text in runs["dev"].messages)
