"""The Kubernetes manifests: what `modelfleet render` writes is exactly what the components apply, and the
objects themselves (schema-valid, probes, shared memory, placement, multi-node layout)."""

from __future__ import annotations

import re

import pytest
import yaml

from modelfleet.plan.capacity.disk import pod_download_gib_s
from modelfleet.plan.serving.engine_args import MODEL_REPOSITORY_DIR, startup_budget_s
from modelfleet.render.fleet import render_triton_repositories
from modelfleet.render.k8s import (
    CLUSTER,
    render_triton_manifests,
    repository_objects,
    vllm_models,
)
from modelfleet.render.manifests import render_fleet_manifests
from modelfleet.render.k8s.triton import REPOSITORY_DIGEST, shm_bytes
from tests.components.mocked import k8s_objects
from tests.conftest import STACKS

# not in kubernetes-validate's built-in schemas (tests/hardening/test_judges.py validates them against the CRDs)
CRD_KINDS = {"ServiceMonitor", "LeaderWorkerSet", "PrometheusRule", "Rollout", "AnalysisTemplate", "HTTPRoute"}


def rendered_objects(project, stack: str) -> list[dict]:
    """What ``render`` writes: dashboards included (the program builds them too)."""
    from modelfleet.grafana import build_dashboard

    files = project.rendered(stack, dashboards=build_dashboard)[1]
    return [o for name, text in sorted(files.items()) if name.startswith("kubernetes/") for o in yaml.safe_load_all(text)]


@pytest.mark.parametrize("stack", STACKS)
def test_render_is_exactly_what_is_applied(runs, project, stack):
    """Every object in render's kubernetes/*.yaml is applied with exactly those inputs, and nothing else is
    applied but the HF token Secrets (their data is a Pulumi secret, never written to disk)."""
    rendered = {(o["kind"], o["metadata"]["name"]): o for o in rendered_objects(project, stack)}
    applied = k8s_objects(runs[stack])
    assert {k: v for k, v in applied.items() if k[0] != "Secret"} == rendered
    assert {n for k, n in applied if k == "Secret"} == {f"{m.name}-hf-token" for m in vllm_models(project.plan(stack))
                                                       if not m.artifact.startswith("s3://")}
    assert "prerequisites/prometheus-adapter-values.yaml" in project.rendered(stack)[1]
    types = {r.type for r in runs[stack].resources if r.type.startswith("kubernetes:")}
    assert "kubernetes:apps/v1:Deployment" in types and "kubernetes:autoscaling/v2:HorizontalPodAutoscaler" in types or stack == "dev"


@pytest.mark.parametrize("stack", STACKS)
def test_built_in_kinds_pass_kubernetes_validate_strict(project, stack):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    version = project.environment(stack).kubernetes_version
    objects = [o for o in rendered_objects(project, stack) if o["kind"] not in CRD_KINDS]
    for obj in objects:
        kubernetes_validate.validate(obj, version, strict=True)
    assert {"Deployment", "Service", "PodDisruptionBudget", "NetworkPolicy", "ServiceAccount", "DaemonSet",
            "Namespace"} <= {o["kind"] for o in objects}


def test_manifests_are_deterministic(project, plans):
    deploy = project.environment("prod").deploy
    assert render_fleet_manifests(plans["prod"], deploy) == render_fleet_manifests(plans["prod"], deploy)
    assert yaml.safe_dump(render_fleet_manifests(plans["prod"], deploy)) == yaml.safe_dump(
        render_fleet_manifests(plans["prod"], deploy, render_triton_repositories(plans["prod"])))


def _pod(obj: dict) -> dict:
    return obj["spec"]["template"]["spec"]


def workload(objects: list[dict]) -> dict:
    """A workload's Deployment, or its Rollout when it ships as a canary (#15)."""
    return next(o for o in objects if o["kind"] in ("Deployment", "Rollout", "LeaderWorkerSet"))


def test_triton_pod_builds_its_repository_then_serves(project, plans):
    plan, deploy = plans["prod"], project.environment("prod").deploy
    server = plan.server(plan.model("image-preprocessor").server)
    deployment = workload(render_fleet_manifests(plan, deploy)[server.name])
    pod = _pod(deployment)
    (init,) = pod["initContainers"]
    script = init["command"][2]
    # the configs of this revision: content-addressed, so an old pod never reads a newer revision's
    assert re.search(rf"s3://{deploy.model_repository_bucket}/triton/{server.kube_name}/[0-9a-f]{{16}}/ {MODEL_REPOSITORY_DIR}/",
                     script)
    for name in server.models:  # each pinned version folder alone (#15)
        model = plan.model(name)
        assert all(f"{model.artifact}/{v}/ {MODEL_REPOSITORY_DIR}/{name}/{v}/" in script for v in model.versions)
    (container,) = pod["containers"]
    assert container["startupProbe"]["failureThreshold"] * container["startupProbe"]["periodSeconds"] >= startup_budget_s(
        sum(plan.model(n).weights_gib for n in server.models), pod_download_gib_s(plan, server.node_group))
    shm = next(v for v in pod["volumes"] if v["name"] == "dshm")["emptyDir"]
    assert shm["medium"] == "Memory" and shm["sizeLimit"] == f"{shm_bytes(server, plan) // 1024**2}Mi"
    assert shm_bytes(server, plan) >= 2 * server.python_shm_bytes > 0  # a python model lives here
    assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert {c["securityContext"]["readOnlyRootFilesystem"] for c in [*pod["containers"], *pod["initContainers"]]} == {True}


def test_a_config_change_rolls_the_triton_pods(project, plans):
    plan, deploy = plans["prod"], project.environment("prod").deploy
    server = plan.triton_servers[0]
    repository = repository_objects(render_triton_repositories(plan), server)
    before = workload(render_triton_manifests(plan, server, "bucket", deploy.aws_cli_image, repository))
    changed = {k: v + b"\n" if k.endswith("config.pbtxt") else v for k, v in repository.items()}
    after = workload(render_triton_manifests(plan, server, "bucket", deploy.aws_cli_image, changed))
    digest = [d["spec"]["template"]["metadata"]["annotations"][REPOSITORY_DIGEST] for d in (before, after)]
    assert digest[0] != digest[1]


def test_the_multi_node_model_is_one_zone_per_group_and_spread_across_zones(project, plans):
    plan = plans["prod"]
    model = next(m for m in vllm_models(plan) if m.nodes_per_replica > 1)
    lws = next(o for o in render_fleet_manifests(plan, project.environment("prod").deploy)[model.name]
               if o["kind"] == "LeaderWorkerSet")
    template = lws["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        pod = template[role]["spec"]
        (term,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert term["topologyKey"] == "topology.kubernetes.io/zone"
        assert term["matchLabelKeys"] == ["leaderworkerset.sigs.k8s.io/group-key"]
        assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == model.gpus_per_pod
    assert model.spread_zones and "topologySpreadConstraints" in template["leaderTemplate"]["spec"]
    assert template["restartPolicy"] == "RecreateGroupOnPodRestart"


@pytest.mark.parametrize("stack", STACKS)
def test_every_workload_has_probes_limits_and_a_tokenless_account(project, stack):
    for obj in rendered_objects(project, stack):
        pods = ([obj["spec"]["template"]["spec"]] if obj["kind"] in ("Deployment", "DaemonSet", "Rollout") else
                [t["spec"] for k, t in obj["spec"]["leaderWorkerTemplate"].items() if k.endswith("Template")]
                if obj["kind"] == "LeaderWorkerSet" else [])
        for pod in pods:
            assert pod["automountServiceAccountToken"] is False
            for container in pod["containers"]:
                assert container["resources"]["requests"] and container["resources"]["limits"]
                assert obj["kind"] == "DaemonSet" or {"livenessProbe", "readinessProbe"} <= set(container)
                assert container["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_the_device_plugin_runs_on_this_fleets_gpu_nodes_only(project, plans):
    plan = plans["prod"]
    cluster = render_fleet_manifests(plan, project.environment("prod").deploy)[CLUSTER]
    (plugin,) = [o for o in cluster if o["kind"] == "DaemonSet"]
    terms = _pod(plugin)["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    gpu = sorted({g.instance_type for g in plan.node_groups if g.device == "gpu"})
    assert terms[0]["matchExpressions"][0]["values"] == gpu  # never the CPU group's c7i.xlarge: it has no GPU
    assert "c7i.xlarge" in {g.instance_type for g in plan.node_groups} and "c7i.xlarge" not in gpu


def test_a_leader_worker_sets_budget_covers_every_pod_of_every_group(project, plans):
    """Evicting a worker restarts its whole group as surely as evicting the leader: the budget selects all
    of the model's pods and lets one go at a time."""
    plan = plans["prod"]
    model = next(m for m in vllm_models(plan) if m.nodes_per_replica > 1)
    objects = render_fleet_manifests(plan, project.environment("prod").deploy)[model.name]
    (budget,) = [o for o in objects if o["kind"] == "PodDisruptionBudget"]
    assert budget["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": model.name}}}
    lws = next(o for o in objects if o["kind"] == "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    for role in ("leaderTemplate", "workerTemplate"):
        labels = lws[role]["metadata"]["labels"]
        assert budget["spec"]["selector"]["matchLabels"].items() <= labels.items(), role


@pytest.mark.parametrize("stack", STACKS)
def test_rendered_yaml_has_no_anchors_or_aliases(project, stack):
    """A dict shared by two probes was written once and referenced (``exec: *id001``)."""
    files = project.rendered(stack)[1]
    texts = [text.decode() for name, text in files.items() if name.startswith(("kubernetes/", "prerequisites/"))]
    assert texts and not any(re.search(r"[&*]id\d{3}", text) for text in texts)
    ray_probes = [o for name, text in files.items() if name.startswith("kubernetes/") for o in yaml.safe_load_all(text)
                  if o["kind"] == "LeaderWorkerSet"]
    assert ray_probes or stack != "prod"
