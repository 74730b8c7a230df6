"""Triton servers and vLLM models as the program creates them under mocks: arguments, S3 objects, identity."""

from __future__ import annotations

import base64

import json
import shlex

import pytest

from modelfleet.plan.types import TritonModelPlan
from modelfleet.render.k8s import vllm_models
from tests.components.mocked import k8s_objects, of_type
from tests.conftest import STACKS


def _pod(obj: dict, template: str = "template") -> dict:
    spec = obj["spec"]
    return spec[template]["spec"] if template == "template" else spec["leaderWorkerTemplate"][template]["spec"]


def _kind(rollout) -> str:
    """A canary ships as an Argo Rollouts Rollout with the Deployment's pod template (#15)."""
    return "Rollout" if rollout.strategy == "canary" else "Deployment"


@pytest.mark.parametrize("stack", STACKS)
def test_triton_deployments_run_the_plans_arguments(runs, plans, stack):
    applied, plan = k8s_objects(runs[stack]), plans[stack]
    for server in plan.triton_servers:
        deployment = applied[(_kind(server.rollout), server.kube_name)]
        pod = _pod(deployment)
        (container,) = pod["containers"]
        assert [*container["command"], *container["args"]] == list(server.args)
        assert container["image"] == server.image
        if server.device == "gpu":
            assert container["resources"]["limits"]["nvidia.com/gpu"] == server.gpus_per_replica
            assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        else:  # a KIND_CPU server: no GPU asked for, nothing to tolerate, the node's CPU the kubelet offers
            assert "nvidia.com/gpu" not in container["resources"]["limits"] and "tolerations" not in pod
            group = plan.node_group(server.node_group)
            assert container["resources"]["requests"]["cpu"] == f"{round((group.allocatable.cpu - group.daemonset_allowance.cpu) * 1000)}m"
        assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
        assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
        assert deployment["spec"]["replicas"] == server.replicas
        assert pod["nodeSelector"]["node.kubernetes.io/instance-type"] == server.instance_type
        assert pod["securityContext"]["runAsUser"] == 1000 and pod["securityContext"]["runAsNonRoot"] is True
        assert ("topologySpreadConstraints" in pod) == server.spread_zones


@pytest.mark.parametrize("stack", STACKS)
def test_vllm_workloads_run_the_plans_arguments(runs, plans, stack):
    applied, plan = k8s_objects(runs[stack]), plans[stack]
    for model in vllm_models(plan):
        if model.pipeline_parallel_size == 1:
            (container,) = _pod(applied[(_kind(model.rollout), model.name)])["containers"]
            assert container["command"] == list(model.args)
            assert container["startupProbe"]["httpGet"]["path"] == "/health"
            continue
        lws = applied[("LeaderWorkerSet", model.name)]["spec"]
        assert lws["leaderWorkerTemplate"]["size"] == model.pipeline_parallel_size == model.nodes_per_replica
        leader = _pod(applied[("LeaderWorkerSet", model.name)], "leaderTemplate")["containers"][0]["command"]
        worker = _pod(applied[("LeaderWorkerSet", model.name)], "workerTemplate")["containers"][0]["command"]
        assert leader[:2] == ["/bin/sh", "-c"] and leader[2].startswith("ray start --head --port=6379 && exec ")
        assert shlex.split(leader[2].removeprefix("ray start --head --port=6379 && exec ")) == list(model.args)
        assert "ray start --address=$(LWS_LEADER_ADDRESS):6379 --block" in worker[2]
        assert applied[("Service", model.name)]["spec"]["selector"]["role"] == "leader"


def test_the_example_has_a_multi_node_model(plans):
    assert any(m.nodes_per_replica > 1 for m in vllm_models(plans["prod"]))


@pytest.mark.parametrize("stack", STACKS)
def test_each_config_is_one_s3_object_under_its_servers_prefix(runs, project, stack):
    plan, files = project.rendered(stack)
    # uploaded under the name the cluster knows the server by, rendered under the plan's
    named = {s.kube_name: s.name for s in plan.triton_servers}
    objects = of_type(runs[stack], "aws:s3/bucketObjectv2:BucketObjectv2").values()
    # configs as text, a warmup sample (binary) as base64: S3 stores the bytes either way
    uploaded = {o.inputs["key"]: o.inputs["content"].encode() if "content" in o.inputs
                else base64.b64decode(o.inputs["contentBase64"]) for o in objects}
    assert any("contentBase64" in o.inputs and o.inputs["contentType"] == "application/octet-stream" for o in objects)
    # defect 8: under a content-addressed prefix per revision (triton/<server>/<16 hex>/...), kept by Pulumi
    # when a later revision replaces it, so a pod of the old revision never reads the new configs
    revisions = {key.split("/")[2] for key in uploaded}
    assert all(len(r) == 16 and int(r, 16) >= 0 for r in revisions)
    assert {"/".join(["triton", named[k.split("/")[1]]] + k.split("/")[3:]): v for k, v in uploaded.items()} == {
        k: v for k, v in files.items() if k.startswith("triton/") and not k.endswith("server.json")}
    for obj in objects:
        assert obj.parent.endswith(f"TritonServer::{named[obj.inputs['key'].split('/')[1]]}")
        assert obj.retain_on_delete


@pytest.mark.parametrize("stack", STACKS)
def test_pod_roles_read_only_their_own_prefix_and_artifacts(runs, plans, project, stack):
    plan, result = plans[stack], runs[stack]
    bucket = project.environment(stack).deploy.model_repository_bucket
    policies = of_type(result, "aws:iam/rolePolicy:RolePolicy")
    associations = of_type(result, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    for server in plan.triton_servers:
        document = json.loads(policies[f"{server.name}-read"].inputs["policy"])
        artifacts = {m.artifact.removeprefix("s3://").rstrip("/") for n in server.models
                     if isinstance(m := plan.model(n), TritonModelPlan)}
        assert set(document["Statement"][0]["Resource"]) == {f"arn:aws:s3:::{bucket}/triton/{server.kube_name}/*",
                                                             *(f"arn:aws:s3:::{a}/*" for a in artifacts)}
        assert {s["Action"] for s in document["Statement"]} == {"s3:GetObject", "s3:ListBucket"}
        association = associations[f"{server.name}-identity"].inputs
        assert (association["namespace"], association["serviceAccount"]) == (plan.namespace, server.kube_name)
        assert json.loads(of_type(result, "aws:iam/role:Role")[f"{server.name}-pod"].inputs["assumeRolePolicy"])[
            "Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}


def test_a_streamed_llm_gets_a_read_role_and_a_staged_one_a_token_and_a_write_role(runs, plans):
    """s3:// artifact: a role reading it, no token. Staged Hub checkpoint: a role reading its copy, the token (for
    the Job) and the Job's role writing that one prefix."""
    result, plan = runs["prod"], plans["prod"]
    secrets = of_type(result, "kubernetes:core/v1:Secret")
    policies = of_type(result, "aws:iam/rolePolicy:RolePolicy")
    associations = of_type(result, "aws:eks/podIdentityAssociation:PodIdentityAssociation")
    for model in vllm_models(plan):
        token = f"secret-{plan.namespace}-{model.name}-hf-token"
        reads = json.loads(policies[f"{model.name}-read"].inputs["policy"])["Statement"][0]["Resource"]
        assert reads == [f"arn:aws:s3:::{model.weights.uri.removeprefix('s3://')}/*"]
        if model.weights.source == "s3":
            assert token not in secrets and f"{model.name}-stage-write" not in policies
        else:
            assert model.weights.source == "staged" and token in secrets
            writes = json.loads(policies[f"{model.name}-stage-write"].inputs["policy"])["Statement"][0]["Resource"]
            assert writes == reads[0]
            assert associations[f"{model.name}-stage-identity"].inputs["serviceAccount"] == f"{model.name}-stage"
    assert {m.weights.source for m in vllm_models(plan)} == {"s3", "staged"}


@pytest.mark.parametrize("stack", STACKS)
def test_autoscaled_workloads_leave_replicas_to_their_hpa(runs, stack):
    result = runs[stack]
    scaled = {(o["spec"]["scaleTargetRef"]["kind"], o["spec"]["scaleTargetRef"]["name"])
              for o in k8s_objects(result).values() if o["kind"] == "HorizontalPodAutoscaler"}
    for r in result.resources:
        if r.type.startswith("kubernetes:") and "kind" in r.inputs:
            key = (r.inputs["kind"], r.inputs["metadata"]["name"])
            # an HTTPRoute's weights are Argo Rollouts' to move during a canary (#15)
            owned = ("spec.replicas",) if key in scaled else ("spec.rules",) if key[0] == "HTTPRoute" else ()
            assert r.ignore_changes == owned, key
    assert scaled or stack == "dev"
