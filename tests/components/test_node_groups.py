"""GPU node groups, their launch templates and the node role, as the program creates them under mocks."""

from __future__ import annotations

import base64
import tomllib

import pytest

from modelfleet.plan.capacity.disk import GP3_MAX_MIBPS, pod_disk_gib_s
from modelfleet.plan.hardware.kubelet import ephemeral_allocatable_gib
from modelfleet.plan.capacity.node_volume import node_disk_gib
from modelfleet.render.k8s.vllm import HF_CACHE, startup_s
from modelfleet.plan.teams import node_group_team
from tests.components.mocked import copy_project, example_models, k8s_objects, live_group, of_type, run, stack_config
from modelfleet.project import Project
from tests.conftest import ROOT, STACKS

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"


def deployed(plan) -> list[tuple[str, object, tuple[int, int, int], str | None]]:
    """(EKS group, plan group, sizes, zone): a zonal plan group is one EKS group per zone."""
    out = []
    for g in plan.node_groups:
        if g.zonal:
            out += [(f"{g.name}-{z.zone}", g, (z.min_size, z.desired_size, z.max_size), z.zone) for z in g.zonal]
        else:
            out.append((g.name, g, (g.min_size, g.desired_size, g.max_size), None))
    return out


@pytest.mark.parametrize("stack", STACKS)
def test_node_groups_match_the_plan(runs, plans, project, stack):
    groups, plan = of_type(runs[stack], NODE_GROUP), plans[stack]
    assert sorted(groups) == sorted(name for name, *_ in deployed(plan))
    for name, planned, (low, desired, high), zone in deployed(plan):
        inputs = groups[name].inputs
        assert inputs["instanceTypes"] == [planned.instance_type]
        assert inputs["scalingConfig"] == {"minSize": low, "desiredSize": desired, "maxSize": high}
        assert high >= 1, "EKS refuses a node group whose max is 0"
        assert inputs["capacityType"] == ("SPOT" if planned.capacity_type == "spot" else "ON_DEMAND")
        assert project.environment(stack).deploy.ami_type == "AL2023_x86_64_NVIDIA"
        if planned.device == "gpu":
            assert inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
            assert inputs["amiType"] == "AL2023_x86_64_NVIDIA"
        else:  # KIND_CPU servers' nodes: the same AMI family without the NVIDIA driver, nothing to keep away
            assert inputs.get("taints", []) == [] and inputs["amiType"] == "AL2023_x86_64_STANDARD"
            assert "modelfleet.io/gpu" not in inputs["labels"]
        assert inputs["labels"]["modelfleet.io/node-group"] == planned.name
        assert inputs["tags"] == {**inputs["labels"], "modelfleet.io/node-group": name, "modelfleet.io/stack": stack,
                                  "modelfleet.io/team": node_group_team(plan, planned)}  # tests/test_teams.py
        assert inputs["nodeGroupNamePrefix"] == f"{name}-"  # replaced groups are created before deletion
        autoscaled = high > low
        assert groups[name].ignore_changes == (("scalingConfig.desiredSize",) if autoscaled else ())


@pytest.mark.parametrize("stack", STACKS)
def test_launch_templates_enforce_imdsv2_and_size_the_disk(runs, plans, project, stack):
    templates, plan = of_type(runs[stack], LAUNCH_TEMPLATE), plans[stack]
    deploy = project.environment(stack).deploy
    for name, group, _, _ in deployed(plan):
        inputs = templates[f"{name}-lt"].inputs
        assert inputs["metadataOptions"] == {"httpEndpoint": "enabled", "httpTokens": "required",
                                             "httpPutResponseHopLimit": 1}
        (disk,) = inputs["blockDeviceMappings"]
        assert disk["deviceName"] == "/dev/xvda"
        volume = group.root_volume
        if group.ephemeral_storage_on == "instance-store":  # the OS only: the stack's floor at gp3's baseline
            assert (volume.size_gib, volume.throughput_mibps, volume.iops) == (deploy.node_disk_gib, 125, 3000)
            assert "strategy: RAID0" in base64.b64decode(inputs["userData"]).decode()
        else:
            assert volume.size_gib == node_disk_gib(plan, group.name, deploy.node_disk_gib, deploy.ami_type) >= deploy.node_disk_gib
            assert "userData" not in inputs
        assert disk["ebs"]["volumeSize"] == volume.size_gib
        assert (disk["ebs"]["volumeType"], disk["ebs"]["throughput"], disk["ebs"]["iops"]) == (
            "gp3", volume.throughput_mibps, volume.iops)
        assert 125 <= volume.throughput_mibps <= GP3_MAX_MIBPS and volume.iops >= max(3000, 4 * volume.throughput_mibps)
        assert disk["ebs"]["encrypted"] == "true"


@pytest.fixture(scope="module")
def downloading():
    """prod with ``deploy.stageHubWeights: false``: every 405B pod downloads the checkpoint into its emptyDir
    (the layout before weights were staged, still chosen for an unpinned Hub model)."""
    config = stack_config("prod")
    config["modelfleet:deploy"] = {**config["modelfleet:deploy"], "stageHubWeights": False}
    return run("prod", config=config), Project(root=str(ROOT)).deployment("prod", config).plan


def _ephemeral(container: dict) -> int:
    return int(container["resources"]["requests"]["ephemeral-storage"][:-2])


def test_the_405b_pods_fit_the_disk_the_kubelet_offers(runs, plans, project, downloading):
    """Defect 1: each 405B pod requested 838 GiB of ephemeral storage on a 900 GiB root volume, of which
    AL2023's kubelet offers 0.9 x 900 - 1 = 809 GiB: Pending forever. Its nodes now put the pods' writes on
    the p5's 8 x 3.84 TB NVMe (RAID0 through nodeadm), and a pod that downloads the checkpoint fits what the
    kubelet offers there; a staged checkpoint (the default) is streamed, and the pod asks for a few GiB."""
    result, plan = downloading
    model = plan.model("llama-3-1-405b-instruct")
    assert model.weights.source == "hub"
    group = plan.node_group(model.node_group)
    lws = k8s_objects(result)[("LeaderWorkerSet", model.name)]["spec"]["leaderWorkerTemplate"]
    requested = _ephemeral(lws["workerTemplate"]["spec"]["containers"][0])
    assert requested >= model.weights_gib
    assert group.ephemeral_storage_on == "instance-store" and group.instance_store_gib == 30720 * 10**9 // 2**30
    offered = ephemeral_allocatable_gib(group.instance_store_gib, project.environment("prod").deploy.ami_type)
    assert group.allocatable.ephemeral_storage_gib == pytest.approx(offered, abs=0.01)
    assert requested + 40 + group.daemonset_allowance.ephemeral_storage_gib <= offered
    assert ephemeral_allocatable_gib(900, "AL2023_x86_64_NVIDIA") < requested, "the old 900 GiB volume never fit"
    templates = of_type(result, LAUNCH_TEMPLATE)
    for zone in group.zonal:
        user_data = base64.b64decode(templates[f"{group.name}-{zone.zone}-lt"].inputs["userData"]).decode()
        assert "kind: NodeConfig" in user_data and "strategy: RAID0" in user_data
    staged = k8s_objects(runs["prod"])[("LeaderWorkerSet", model.name)]["spec"]["leaderWorkerTemplate"]
    assert plans["prod"].model(model.name).weights.source == "staged"
    assert _ephemeral(staged["workerTemplate"]["spec"]["containers"][0]) <= 10


def test_the_405b_model_cold_starts_within_its_probe_budget(runs, plans, downloading):
    """Defect 11: the 405B downloaded 756 GiB under its startup probe's clock, and a download slower than
    assumed killed the leader, whose restart wiped the emptyDir and began again from zero.

    Staged (the default): the copy from the Hub is the staging Job's, once per revision, off the probe's clock;
    each pod waits for its marker in an init container, then streams its ranks' share from S3 (378 GiB) under a
    startup probe that counts exactly that. Downloaded (``stageHubWeights: false``): the download runs in an init
    container (a failed one restarts alone, keeping the emptyDir; huggingface_hub resumes), and the startup
    probe counts only the read-back of the pod's pipeline stage from the instance store."""
    plan = plans["prod"]
    model = plan.model("llama-3-1-405b-instruct")
    lws = k8s_objects(runs["prod"])[("LeaderWorkerSet", model.name)]["spec"]["leaderWorkerTemplate"]
    needed_s = 300 + model.weights.pod_read_gib / 0.5
    assert model.weights.pod_read_gib == pytest.approx(model.checkpoint_gib / 2, abs=1e-3)
    for role in ("leaderTemplate", "workerTemplate"):
        spec = lws[role]["spec"]
        (wait,) = spec["initContainers"]
        assert wait["name"] == "weights-staged" and "modelfleet-staged.json" in wait["command"][2]
        probe = spec["containers"][0]["startupProbe"]
        assert probe["periodSeconds"] * probe["failureThreshold"] >= needed_s
    job = next(o for (kind, name), o in k8s_objects(runs["prod"]).items() if kind == "Job" and name.startswith(model.name))
    assert job["spec"]["activeDeadlineSeconds"] >= model.checkpoint_gib / 0.5, "the Job has the Hub's time"

    result, plan = downloading
    model = plan.model("llama-3-1-405b-instruct")
    lws = k8s_objects(result)[("LeaderWorkerSet", model.name)]["spec"]["leaderWorkerTemplate"]
    disk_gib_s = pod_disk_gib_s(plan, model.node_group)
    assert disk_gib_s >= 1.0  # one pod per p5 node: all of its instance store
    needed_s = 300 + model.weights_gib / 2 / disk_gib_s
    for role in ("leaderTemplate", "workerTemplate"):
        spec = lws[role]["spec"]
        (download,) = spec["initContainers"]
        assert download["name"] == "model-download" and "snapshot_download" in download["command"][2]
        assert {"name": "hf-cache", "mountPath": HF_CACHE} in download["volumeMounts"]
        probe = spec["containers"][0]["startupProbe"]
        assert probe["periodSeconds"] * probe["failureThreshold"] >= needed_s
    assert model.weights_gib / 0.5 > startup_s(model, plan), "the download is no longer on the probe's clock"
    budget = int(k8s_objects(result)[("LeaderWorkerSet", model.name)]["metadata"]["annotations"][
        "pulumi.com/timeoutSeconds"])
    assert budget >= model.replicas * (model.weights_gib / 0.5 + startup_s(model, plan)), "Pulumi waits for both"


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
    amis = {name: r.inputs["amiType"] for name, r in of_type(bottlerocket, NODE_GROUP).items()}
    assert {a for n, a in amis.items() if n.startswith("gpu-")} == {"BOTTLEROCKET_x86_64_NVIDIA"}
    assert {a for n, a in amis.items() if n.startswith("cpu-")} == {"BOTTLEROCKET_x86_64"}  # no driver on a CPU node
    devices = {t.inputs["blockDeviceMappings"][0]["deviceName"] for t in of_type(bottlerocket, LAUNCH_TEMPLATE).values()}
    assert devices == {"/dev/xvdb"}, "Bottlerocket keeps images and emptyDirs on its data volume"
    for name, template in of_type(bottlerocket, LAUNCH_TEMPLATE).items():  # its instance store, through apiclient
        if name.startswith("cpu-"):  # the CPU types are EBS-only: no instance store to set up
            assert "userData" not in template.inputs
            continue
        settings = base64.b64decode(template.inputs["userData"]).decode()
        command = tomllib.loads(settings)["settings"]["bootstrap-commands"]["k8s-ephemeral-storage"]
        assert command["commands"][0] == ["apiclient", "ephemeral-storage", "init"] and command["essential"]


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
    running = (group.min_size, group.min_size, group.max_size)  # scaled in to its floor when the PR lands
    models = example_models()
    extra = dict(next(m for m in models["models"] if m["name"] == "llama-3-1-8b-instruct"), name="qwen-7b-chat",
                 architecture="qwen2.5-7b", artifact="Qwen/Qwen2.5-7B-Instruct")
    models["models"].append(extra)
    result = run("prod", copy_project(tmp_path, models), live=[live_group(group.name, "prod", running)])
    scaling = of_type(result, NODE_GROUP)[group.name].inputs["scalingConfig"]
    assert scaling["minSize"] > running[1] and scaling["desiredSize"] == scaling["minSize"]
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
    groups = of_type(runs["prod"], NODE_GROUP)
    assert prod and all(g.inputs["subnetIds"] == list(prod) for name, g in groups.items() if "-zone-" not in name)
    # a zonal group (defect 2: multi-node replicas) gets its zone's subnet only: zone-i is the i-th zone
    zonal = {name.rsplit("-zone-", 1)[1]: g.inputs["subnetIds"] for name, g in groups.items() if "-zone-" in name}
    assert zonal == {str(i): [subnet] for i, subnet in enumerate(sorted(prod), 1)}
    assert not any("control plane" in text for _, text in runs["prod"].messages)
    looked_up = ["subnet-0private0a", "subnet-0private0b", "subnet-0private0c"]  # what the mocked cluster reports
    assert all(g.inputs["subnetIds"] == looked_up for g in of_type(runs["dev"], NODE_GROUP).values())
    assert any(level == "warning" and "set modelfleet:cluster.subnetIds to its private subnets" in text
               for level, text in runs["dev"].messages)


def test_multi_node_groups_update_zone_by_zone_forced(runs, plans):
    """Defect 4: EKS gives up draining after 15 minutes (PodEvictionFailure) while a LeaderWorkerSet's budget
    holds every eviction as long as a recreated group reloads. A zonal group's update is forced, one
    replica's nodes at a time, each zone's group after the previous zone's; other groups keep to their
    budgets one node at a time."""
    plan, groups = plans["prod"], of_type(runs["prod"], NODE_GROUP)
    model = plan.model("llama-3-1-405b-instruct")
    zonal = [f"{model.node_group}-{z.zone}" for z in plan.node_group(model.node_group).zonal]
    for index, name in enumerate(zonal):
        inputs = groups[name].inputs
        assert inputs["forceUpdateVersion"] is True
        assert inputs["updateConfig"] == {"maxUnavailable": model.nodes_per_replica}
        if index:
            assert groups[zonal[index - 1]].urn in groups[name].depends_on
    for name, group in groups.items():
        if name not in zonal:
            assert group.inputs["updateConfig"] == {"maxUnavailable": 1} and "forceUpdateVersion" not in group.inputs


def test_the_joined_clusters_version_is_read_and_features_it_lacks_refused(project):
    """Defect 7: a joined cluster was taken to be 1.33. The program reads its version: below 1.31 the API
    server drops podAffinity.matchLabelKeys and a LeaderWorkerSet's groups would span zones, so `pulumi up`
    stops; another version than the stack's is a warning."""
    old = run("prod", expect_error=True, version="1.30")
    assert "runs Kubernetes 1.30; podAffinity.matchLabelKeys keeps each multi-node replica in one zone from 1.31" \
        in old.error and "llama-3-1-405b-instruct" in old.error and "upgrade the cluster to 1.31" in old.error
    newer = run("prod", version="1.34")
    assert any(level == "warning" and 'set modelfleet:kubernetesVersion: "1.34"' in text for level, text in newer.messages)
    assert not any("kubernetesVersion" in text for _, text in run("prod", version="1.33").messages)


def test_a_cpu_group_is_its_own_component_and_its_pods_land_only_there(runs, plans):
    """The KIND_CPU servers' nodes: a CpuNodeGroup (its URN names it, so `pulumi state` commands find it), the
    driverless AMI, no taint; the server's pods select its instance type and tolerate nothing."""
    from modelfleet.deploy.node_groups import node_group_urn
    plan = plans["prod"]
    (group,) = [g for g in plan.node_groups if g.device == "cpu"]
    recorded = of_type(runs["prod"], NODE_GROUP)[group.name]
    assert recorded.parent.endswith(f"modelfleet:index:CpuNodeGroup::{group.name}")
    assert node_group_urn("prod", "modelfleet", group.name).startswith(
        "urn:pulumi:prod::modelfleet::modelfleet:index:CpuNodeGroup$aws:eks/nodeGroup:NodeGroup::")
    assert (group.instance_type, group.gpus_per_node, group.pod_slots) == ("c7i.xlarge", 0, 1)
    assert group.allocatable.gpus == 0 and group.requested.gpus == 0
    server = plan.server(group.workloads[0])
    assert (server.device, server.gpus_per_replica, server.models) == ("cpu", 0, ("fraud-scorer",))
