"""Where each vLLM cold start reads its checkpoint (plan/llm/weights.py), what it counts per pod and per GPU, and
what the rendered pods, Job and roles do with it (#12: a weight cache that survives pod and group restarts,
and startup budgets that count what each rank really reads)."""

from __future__ import annotations

import json

import pytest

from modelfleet.plan.serving.engine_args import DOWNLOAD_GIB_PER_S, startup_budget_s
from modelfleet.plan.llm.weights import STAGED_MARKER, weights_plan
from modelfleet.render.iam import stage_write_policy, vllm_read_policy
from modelfleet.render.k8s import render_vllm_manifests, vllm_models
from modelfleet.render.k8s.staging import stage_account, stage_budget_s, stage_job_name
from modelfleet.render.k8s.vllm import startup_s
from modelfleet.spec.environment import DeploySettings
from tests.conftest import STACKS

COMMIT = "069992c75aed59df00ec06c17177e76c63296a26"


def plan_of(artifact, revision=COMMIT, tp=8, pp=2, deploy=DeploySettings()):
    return weights_plan(artifact=artifact, revision=revision, checkpoint_gib=756.0, tp=tp, pp=pp,
                        environment="prod", deploy=deploy)


def test_a_pinned_hub_checkpoint_is_staged_under_its_commit():
    w = plan_of("meta-llama/Llama-3.1-405B-Instruct")
    assert w.source == "staged" and w.hub_id == "meta-llama/Llama-3.1-405B-Instruct" and w.revision == COMMIT
    assert w.uri == f"s3://modelfleet-prod-model-repository/weights/meta-llama/Llama-3.1-405B-Instruct/{COMMIT}"
    named = plan_of("meta-llama/Llama-3.1-405B-Instruct", deploy=DeploySettings(model_repository_bucket="acme-b"))
    assert named.uri.startswith("s3://acme-b/weights/")


def test_the_replicas_ranks_split_the_reads():
    """Distributed streaming: 16 ranks over 2 pods read 1/16 each, so a pod reads half the checkpoint (alone,
    every rank would read all 756 GiB: 6,048 GiB per pod)."""
    w = plan_of("meta-llama/Llama-3.1-405B-Instruct")
    assert w.distributed and w.pod_read_gib == 378.0 and w.rank_read_gib == 47.25 and w.stage_gib == 756.0
    single = plan_of("s3://acme/llama/2024", tp=1, pp=1)
    assert not single.distributed and single.pod_read_gib == single.rank_read_gib == 756.0


def test_what_cannot_be_staged_is_downloaded_by_each_pod_and_says_why():
    unpinned = plan_of("meta-llama/Llama-3.1-8B-Instruct", revision=None)
    assert unpinned.source == "hub" and "pin revision" in unpinned.reason
    off = plan_of("meta-llama/Llama-3.1-8B-Instruct", deploy=DeploySettings(stage_hub_weights=False))
    assert off.source == "hub" and "deploy.stageHubWeights is false" in off.reason
    assert off.pod_read_gib == 756.0 and not off.distributed


@pytest.mark.parametrize("stack", STACKS)
def test_vllm_serves_what_the_weights_plan_says(plans, stack):
    for model in vllm_models(plans[stack]):
        w = model.weights
        assert model.args[2] == w.uri
        streamed = w.source != "hub"
        assert ("--load-format" in model.args) == streamed
        assert ("--revision" in model.args) == (w.source == "hub" and model.revision is not None)
        if w.distributed:
            flag = model.args.index("--model-loader-extra-config")
            assert json.loads(model.args[flag + 1]) == {"distributed": True}
        else:
            assert "--model-loader-extra-config" not in model.args


def test_the_examples_hub_checkpoints_are_staged(plans):
    prod = {m.name: m for m in vllm_models(plans["prod"])}
    assert prod["llama-3-1-405b-instruct"].weights.source == "staged"
    assert prod["llama-3-1-8b-instruct"].weights.source == "staged"
    assert prod["llama-3-3-70b-instruct"].weights.source == "s3"


@pytest.mark.parametrize("stack", STACKS)
def test_startup_budgets_count_what_each_pod_reads(plans, stack):
    """Before: an s3:// model's budget counted the checkpoint once per GPU of the pod (the 70B's 131.5 GiB x 8),
    and a Hub model's counted the node's disk; now both stream, and the pod reads its ranks' share."""
    plan = plans[stack]
    for model in vllm_models(plan):
        if model.weights.source != "hub":
            assert startup_s(model, plan) == startup_budget_s(model.weights.pod_read_gib)
    seventy = next(m for m in vllm_models(plan) if m.name == "llama-3-3-70b-instruct")
    checkpoint = seventy.checkpoint_gib
    assert seventy.weights.pod_read_gib == pytest.approx(checkpoint / seventy.pipeline_parallel_size, abs=1e-3)
    if seventy.gpus_per_pod > 1:  # the ranks split the reads: the pod reads the checkpoint once, not once per GPU
        assert startup_s(seventy, plan) < startup_budget_s(checkpoint * seventy.gpus_per_pod)


def _pods(objects):
    for obj in objects:
        spec = obj.get("spec", {})
        if "template" in spec and obj["kind"] != "Job":
            yield spec["template"]["spec"]
        for role in ("leaderTemplate", "workerTemplate"):
            if role in spec.get("leaderWorkerTemplate", {}):
                yield spec["leaderWorkerTemplate"][role]["spec"]


@pytest.mark.parametrize("stack", ["staging", "prod"])
def test_a_recreated_405b_group_never_reads_the_hub(plans, stack):
    """Each pod of the group waits for the staged marker, then streams S3: no download step, no Hub token, an
    emptyDir a few GiB (it held the 756 GiB checkpoint, 838 GiB requested per pod)."""
    plan = plans[stack]
    model = next(m for m in vllm_models(plan) if m.name == "llama-3-1-405b-instruct")
    objects = render_vllm_manifests(plan, model)
    pods = list(_pods(objects))
    assert len(pods) == 2  # leader and worker
    for pod in pods:
        assert [c["name"] for c in pod["initContainers"]] == ["weights-staged"]
        assert STAGED_MARKER in pod["initContainers"][0]["command"][2]
        assert "hf-token" not in {v["name"] for v in pod["volumes"]}
        cache = next(v for v in pod["volumes"] if v["name"] == "hf-cache")
        assert cache["emptyDir"]["sizeLimit"] == "5Gi"
        requests = pod["containers"][0]["resources"]["requests"]
        assert int(requests["ephemeral-storage"].removesuffix("Gi")) <= 10
    job = next(o for o in objects if o["kind"] == "Job")
    assert job["metadata"]["name"] == stage_job_name(model) == f"llama-3-1-405b-instruct-stage-{COMMIT[:12]}"
    assert [o["kind"] for o in objects[:4]] == ["ServiceAccount", "ConfigMap", "NetworkPolicy", "Job"]
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == stage_account(model) and pod["restartPolicy"] == "Never"
    assert int(job["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]) == stage_budget_s(model)
    assert job["spec"]["activeDeadlineSeconds"] == stage_budget_s(model) >= 2 * 756 / DOWNLOAD_GIB_PER_S
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": [{"key": "modelfleet.io/node-group", "operator": "In", "values": ["system"]}]},
                     {"matchExpressions": [{"key": "modelfleet.io/node-group", "operator": "DoesNotExist"}]}]
    assert "tolerations" not in pod  # and the fleet's GPU nodes are tainted: never on a serving node group


def test_adapters_are_still_downloaded_but_the_checkpoint_is_not(plans):
    """The 8B's pinned LoRA adapters come from the Hub at their commits; its checkpoint is staged."""
    plan = plans["prod"]
    model = next(m for m in vllm_models(plan) if m.name == "llama-3-1-8b-instruct")
    (pod,) = list(_pods(render_vllm_manifests(plan, model)))
    assert [c["name"] for c in pod["initContainers"]] == ["weights-staged", "model-download"]
    script = pod["initContainers"][1]["command"][2]
    assert model.artifact not in script and all(repo in script for _, repo, _ in model.lora_downloads)


def test_the_roles_read_and_write_only_the_staged_revision(plans):
    model = next(m for m in vllm_models(plans["prod"]) if m.name == "llama-3-1-405b-instruct")
    prefix = model.weights.uri.removeprefix("s3://")
    read = json.loads(vllm_read_policy(model))
    assert read["Statement"][0]["Resource"] == [f"arn:aws:s3:::{prefix}/*"]
    write = json.loads(stage_write_policy(model))
    assert write["Statement"][0]["Resource"] == f"arn:aws:s3:::{prefix}/*"
    assert "s3:PutObject" in write["Statement"][0]["Action"]
    assert all("PutObject" not in json.dumps(s) for s in read["Statement"])


def test_the_staging_job_fits_a_created_clusters_default_system_node(catalogue):
    """A created cluster's system nodes are m7i.large (2 vCPU): the Job asks for less than the kubelet offers
    there beside CoreDNS's and a DaemonSet allowance's requests, so it never waits for a node that cannot come."""
    from modelfleet.plan.hardware.kubelet import kube_reserved_cpu_millis
    from modelfleet.render.k8s.staging import STAGE_CONTAINER
    from modelfleet.spec.environment import ClusterSettings

    system = ClusterSettings.model_fields["system_instance_type"].default
    node = catalogue.system_instances[system]
    allowance = DeploySettings().daemonset_allowance.for_node(node.vcpu, 0)
    coredns_millis = 100  # its chart's request
    free_millis = node.vcpu * 1000 - kube_reserved_cpu_millis(node.vcpu) - allowance.cpu * 1000 - coredns_millis
    assert STAGE_CONTAINER.cpu_millis <= free_millis
    assert STAGE_CONTAINER.memory_mib <= node.ram_gib * 1024 / 4  # a quarter of an 8 GiB node
