"""A created cluster runs what the SLO alerts and dashboards need: Prometheus evaluating every PrometheusRule,
Alertmanager, Grafana with its dashboard sidecar; the rules wait for the operator's CRD, the fleet dashboard for
the namespace; the program applies every workload's rules and dashboard."""

from __future__ import annotations

from modelfleet.deploy import compile_deploy_plan
from modelfleet.deploy.types import object_key, release_key
from modelfleet.grafana import build_dashboard
from modelfleet.plan.types import VllmModelPlan
from modelfleet.render.k8s import prerequisites as p
from tests.components.mocked import created_cluster, k8s_objects, of_type, run

RELEASE = "kubernetes:helm.sh/v3:Release"


def test_a_created_cluster_turns_on_grafana_with_the_sidecar_and_alertmanager(project):
    result = run("prod", config=created_cluster("prod"))
    values = of_type(result, RELEASE)["kube-prometheus-stack"].inputs["values"]
    assert values["alertmanager"] == {"enabled": True}
    assert values["prometheus"]["prometheusSpec"]["ruleSelectorNilUsesHelmValues"] is False
    grafana = values["grafana"]
    assert grafana["enabled"] is True and grafana["adminPassword"] == ""
    assert grafana["sidecar"]["dashboards"] == p.GRAFANA_SIDECAR
    objects = k8s_objects(result)
    rules = {name for kind, name in objects if kind == "PrometheusRule"}
    dashboards = {name for (kind, name), o in objects.items() if kind == "ConfigMap"
                  and o["metadata"]["labels"].get(p.GRAFANA_SIDECAR["label"]) == p.GRAFANA_SIDECAR["labelValue"]}
    plan = project.plan("prod")  # one rule set per workload: each Triton server (GPU or CPU), each vLLM model
    assert rules == {s.kube_name for s in plan.triton_servers} | {m.name for m in plan.models if isinstance(m, VllmModelPlan)}
    # triton-g5-xlarge keeps its former name in the cluster (deploy.formerServerNames)
    assert {"triton-image-preprocessor", "triton-c7i-xlarge", "llama-3-1-405b-instruct"} <= rules
    assert dashboards == {f"{name}-dashboard" for name in rules} | {"modelfleet-fleet-dashboard"}


def test_rules_wait_for_the_operator_and_the_fleet_dashboard_for_the_namespace(project):
    fleet = compile_deploy_plan(project.deployment("prod", created_cluster("prod"), dashboards=build_dashboard))
    applied = [o for w in (*fleet.triton_servers, *fleet.vllm_models) for o in w.manifests]
    rules = [o for o in applied if o.manifest["kind"] == "PrometheusRule"]
    assert rules and all(release_key(p.PROMETHEUS_STACK.release) in o.waits_for for o in rules)
    namespace = next(o for o in fleet.cluster_objects if o.manifest["kind"] == "Namespace")
    fleet_map = next(o for o in fleet.cluster_objects if o.manifest["kind"] == "ConfigMap")
    assert fleet_map.waits_for == (object_key(namespace.name),) and namespace.waits_for == ()
