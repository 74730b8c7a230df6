"""``cluster: {create: true}``: a new cluster that can finish a deploy. It has untainted system nodes (GPU
nodes are tainted: CoreDNS and controllers could run nowhere else), the CRDs and controllers the workloads'
objects need, the autoscaler that gives min..max a meaning, and network policies enforced."""

from __future__ import annotations

import json

import pytest
import yaml

from modelfleet.deploy.node_groups import node_group_urn
from modelfleet.render.k8s import prerequisites as p
from tests.components.mocked import created_cluster, k8s_objects, live_group, of_type, run

RELEASE = "kubernetes:helm.sh/v3:Release"
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def test_a_created_cluster_gets_untainted_system_nodes():
    result = run("prod", config=created_cluster("prod"))
    groups = of_type(result, NODE_GROUP)
    system = groups["system"].inputs
    assert system.get("taints", []) == [] and system["amiType"] == "AL2023_x86_64_STANDARD"
    assert system["instanceTypes"] == ["m7i.large"] and system["capacityType"] == "ON_DEMAND"
    assert system["scalingConfig"] == {"minSize": 2, "desiredSize": 2, "maxSize": 4}
    assert all(g.inputs["taints"] for name, g in groups.items() if name.startswith("gpu-")), "GPU nodes stay tainted"
    custom = run("prod", config=created_cluster("prod", systemInstanceType="m7i.xlarge"))
    assert of_type(custom, NODE_GROUP)["system"].inputs["instanceTypes"] == ["m7i.xlarge"]
    assert "system" not in of_type(run("prod"), NODE_GROUP), "a joined cluster has its own"


def test_prerequisites_are_pinned_helm_releases():
    result = run("prod", config=created_cluster("prod"))
    releases = {r.name: r.inputs for r in of_type(result, RELEASE).values()}
    assert {name: (i["chart"], i["version"], i["namespace"]) for name, i in releases.items()} == {
        "cluster-autoscaler": ("cluster-autoscaler", "9.50.1", "kube-system"),
        "kube-prometheus-stack": ("kube-prometheus-stack", "77.12.0", "monitoring"),
        "prometheus-adapter": ("prometheus-adapter", "5.3.0", "monitoring"),
        "lws": ("oci://registry.k8s.io/lws/charts/lws", "0.7.0", "lws-system")}
    assert all(i["name"] == name for name, i in releases.items()), "fixed release names: services derive from them"
    prometheus = releases["kube-prometheus-stack"]["values"]["prometheus"]["prometheusSpec"]
    assert prometheus["serviceMonitorSelectorNilUsesHelmValues"] is False, "every ServiceMonitor is scraped"
    autoscaler = releases["cluster-autoscaler"]["values"]
    assert autoscaler["autoDiscovery"] == {"clusterName": "ml-prod"} and autoscaler["image"]["tag"] == "v1.33.0"


def test_the_adapter_serves_both_hpa_metrics_as_the_rendered_artifact_says(project):
    """The same values reach the created cluster's release and the file a joined cluster's team installs."""
    result = run("prod", config=created_cluster("prod"))
    values = of_type(result, RELEASE)["prometheus-adapter"].inputs["values"]
    rendered = yaml.safe_load(project.rendered("prod")[1][p.ADAPTER_VALUES_FILE])
    assert values == rendered
    served = {rule["name"]["as"] for rule in values["rules"]["custom"]}
    scaled_on = {m["pods"]["metric"]["name"] for o in k8s_objects(result).values()
                 if o["kind"] == "HorizontalPodAutoscaler" for m in o["spec"]["metrics"]}
    assert scaled_on == served == {"nv_inference_pending_request_count", "vllm:num_requests_waiting"}
    assert values["prometheus"]["url"] == "http://kube-prometheus-stack-prometheus.monitoring.svc"


def test_the_lws_controller_comes_only_with_a_multi_node_model():
    assert "lws" in of_type(run("prod", config=created_cluster("prod")), RELEASE)
    dev = run("dev", config=created_cluster("dev"))
    assert not any(o["kind"] == "LeaderWorkerSet" for o in k8s_objects(dev).values())
    assert "lws" not in of_type(dev, RELEASE)


def test_the_autoscaler_may_resize_only_this_clusters_groups():
    result = run("prod", config=created_cluster("prod"))
    policy = json.loads(of_type(result, "aws:iam/rolePolicy:RolePolicy")["cluster-autoscaler-autoscaling"].inputs["policy"])
    resize = next(s for s in policy["Statement"] if "autoscaling:SetDesiredCapacity" in s["Action"])
    assert resize["Condition"] == {"StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/ml-prod": "owned"}}
    assert resize["Resource"] == "arn:aws:autoscaling:us-east-1:*:autoScalingGroup:*:autoScalingGroupName/eks-*"
    parliament = pytest.importorskip("parliament")
    document = json.dumps(policy)
    assert parliament.analyze_policy_string(document, include_community_auditors=True).findings == []
    association = of_type(result, "aws:eks/podIdentityAssociation:PodIdentityAssociation")["cluster-autoscaler-identity"]
    assert (association.inputs["namespace"], association.inputs["serviceAccount"]) == ("kube-system", "cluster-autoscaler")


def test_network_policies_are_enforced_in_a_created_cluster():
    addons = of_type(run("prod", config=created_cluster("prod")), "aws:eks/addon:Addon")
    cni = addons["cluster-vpc-cni"].inputs
    assert json.loads(cni["configurationValues"]) == {"enableNetworkPolicy": "true"}
    assert cni["resolveConflictsOnCreate"] == "OVERWRITE", "EKS installed vpc-cni itself; the add-on takes it over"


def test_a_created_clusters_second_deploy_reads_its_groups():
    """The first deploy finds no cluster (nothing to read); later ones read the groups like a joined stack."""
    live = [live_group("system", "prod", (1, 3, 3), instance_type="m7i.large")]  # bounds since changed to 2..4
    first = run("prod", config=created_cluster("prod"), live=live)
    assert of_type(first, NODE_GROUP)["system"].ignore_changes == ("scalingConfig.desiredSize",)
    again = of_type(run("prod", config=created_cluster("prod"), live=live, clusters=["ml-prod"]), NODE_GROUP)["system"]
    assert again.inputs["scalingConfig"]["desiredSize"] == 3 and again.ignore_changes == ()


def test_the_unprotect_command_names_the_system_groups_real_urn():
    result = run("prod", config=created_cluster("prod"))
    recorded = of_type(result, NODE_GROUP)["system"].urn.replace("urn:pulumi:stack::project::", "urn:pulumi:prod::modelfleet::")
    assert node_group_urn("prod", "modelfleet", "system") == recorded
    gpu = next(r for name, r in of_type(result, NODE_GROUP).items() if name != "system")
    assert node_group_urn("prod", "modelfleet", gpu.name) == gpu.urn.replace("urn:pulumi:stack::project::",
                                                                            "urn:pulumi:prod::modelfleet::")


def test_a_created_cluster_applies_the_dcgm_exporter_its_service_monitor_after_the_prometheus_crd():
    """Under Pulumi mocks: the exporter's objects are applied on a created cluster (not on a joined one); its
    ServiceMonitor waits for the Prometheus stack's release, which brings the CRD; no workload waits for the
    exporter (only for the device plugin, which its GPUs need)."""
    from tests.components.test_dependencies import closure

    result = run("prod", config=created_cluster("prod"))
    objects = k8s_objects(result)
    assert {("DaemonSet", "dcgm-exporter"), ("Service", "dcgm-exporter"), ("ServiceMonitor", "dcgm-exporter"),
            ("NetworkPolicy", "dcgm-exporter")} <= objects.keys()
    by_urn, waits = closure(result)
    urn = {(r.inputs.get("kind"), r.inputs.get("metadata", {}).get("name")): r.urn for r in result.resources
           if r.type.startswith("kubernetes:") and "kind" in r.inputs}
    prometheus = next(r.urn for r in result.resources if r.type == RELEASE and r.name == "kube-prometheus-stack")
    assert prometheus in waits(urn[("ServiceMonitor", "dcgm-exporter")])
    exporter = urn[("DaemonSet", "dcgm-exporter")]
    assert not any(exporter in waits(u) for (kind, _), u in urn.items() if kind in ("Deployment", "LeaderWorkerSet"))
    assert ("DaemonSet", "dcgm-exporter") not in k8s_objects(run("prod"))
