"""The real Pulumi program (__main__.py) under the SDK's mocks, for every stack."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from modelfleet.plan import TritonServerPlan, VllmModelPlan
from modelfleet.preview_runner import run_program
from tests.conftest import ROOT, STACKS

SECRET_SIG = "4dabf18193072939515e22adb298388d"  # how Pulumi marks a secret value on the wire
TOKEN = "hf_very_secret_token"


def stack_config(stack: str) -> dict:
    return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]


def run(stack: str, root: Path = ROOT):
    result = run_program(str(root), stack, stack_config(stack), {"modelfleet:hfToken": TOKEN})
    assert result.error is None, result.error
    return result


@pytest.fixture(scope="module")
def runs():
    return {stack: run(stack) for stack in STACKS}


def of_type(result, token: str) -> dict:
    return {r.name: r for r in result.resources if r.type == token}


@pytest.mark.parametrize("stack", STACKS)
def test_node_groups_match_the_plan(runs, plans, stack):
    groups = of_type(runs[stack], "aws:eks/nodeGroup:NodeGroup")
    assert sorted(groups) == sorted(g.name for g in plans[stack].node_groups)
    for planned in plans[stack].node_groups:
        inputs = groups[planned.name].inputs
        assert inputs["instanceTypes"] == [planned.instance_type]
        assert inputs["scalingConfig"] == {"minSize": planned.min_size, "desiredSize": planned.desired_size,
                                           "maxSize": planned.max_size}
        assert inputs["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
        assert inputs["capacityType"] == ("SPOT" if planned.capacity_type == "spot" else "ON_DEMAND")
    templates = of_type(runs[stack], "aws:ec2/launchTemplate:LaunchTemplate")
    assert all(t.inputs["metadataOptions"]["httpTokens"] == "required" and
               t.inputs["metadataOptions"]["httpPutResponseHopLimit"] == 1 for t in templates.values())


def test_node_role_has_exactly_the_three_worker_policies(runs):
    attached = sorted(r.inputs["policyArn"] for r in of_type(runs["prod"], "aws:iam/rolePolicyAttachment:RolePolicyAttachment").values()
                      if r.name.startswith("gpu-nodes-"))
    assert attached == sorted(["arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
                               "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
                               "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"])


@pytest.mark.parametrize("stack", STACKS)
def test_workload_args_equal_the_plan(runs, plans, stack):
    result, plan = runs[stack], plans[stack]
    deployments = of_type(result, "kubernetes:apps/v1:Deployment")
    sets = of_type(result, "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet")
    for server in plan.triton_servers:
        container = deployments[f"deployment-{plan.namespace}-{server.name}"].inputs["spec"]["template"]["spec"]["containers"][0]
        assert [*container["command"], *container["args"]] == list(server.args)
    for model in plan.models:
        if isinstance(model, VllmModelPlan) and model.pipeline_parallel_size == 1:
            container = deployments[f"deployment-{plan.namespace}-{model.name}"].inputs["spec"]["template"]["spec"]["containers"][0]
            assert container["command"] == list(model.args)
        elif isinstance(model, VllmModelPlan):
            spec = sets[f"leaderworkerset-{plan.namespace}-{model.name}"].inputs["spec"]
            assert spec["leaderWorkerTemplate"]["size"] == model.pipeline_parallel_size
            leader = spec["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["command"][-1]
            assert leader.endswith(" ".join(model.args))


def test_render_is_exactly_what_is_applied(runs, project):
    """Every object in `modelfleet render`'s kubernetes/ files is applied with exactly those inputs."""
    files = project.rendered("prod")[1]
    rendered = [o for k, v in files.items() if k.startswith("kubernetes/") for o in yaml.safe_load_all(v)]
    applied = {(r.inputs.get("kind"), r.inputs.get("metadata", {}).get("name")): r.inputs
               for r in runs["prod"].resources
               if r.type.startswith("kubernetes:") and "apiVersion" in r.inputs and r.inputs.get("kind") != "Secret"}
    assert len(rendered) == len(applied) > 20
    for obj in rendered:
        assert applied[(obj["kind"], obj["metadata"]["name"])] == obj


def test_hf_token_stays_secret(runs):
    secrets = of_type(runs["prod"], "kubernetes:core/v1:Secret")
    assert secrets
    for secret in secrets.values():
        assert SECRET_SIG in secret.inputs["stringData"], "the token must travel as a Pulumi secret"
    flat = repr([r.inputs for r in runs["prod"].resources if r.type != "kubernetes:core/v1:Secret"])
    assert TOKEN not in flat


def test_prod_is_protected_and_dev_is_not(runs):
    for stack, expected in (("prod", True), ("dev", False)):
        protected = {r.type: r.protect for r in runs[stack].resources
                     if r.type in ("aws:eks/nodeGroup:NodeGroup", "aws:s3/bucket:Bucket")}
        assert protected and all(p is expected for p in protected.values()), stack


def test_outputs(runs, plans):
    outputs = runs["prod"].outputs
    assert set(outputs["node_groups"]) == {g.name for g in plans["prod"].node_groups}
    assert outputs["monthly_cost_usd"] > 0
    assert "llama-3-1-8b-instruct" in outputs["endpoints"]


def _copy_project(tmp_path: Path, models: dict) -> Path:
    for name in ("__main__.py", "Pulumi.yaml"):
        shutil.copy(ROOT / name, tmp_path / name)
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    (tmp_path / "models.yaml").write_text(yaml.safe_dump(models, sort_keys=False))
    return tmp_path


def _inputs(result) -> dict:
    return {(r.type, r.name): r.inputs for r in result.resources}


def test_reordering_models_changes_nothing(runs, tmp_path):
    models = yaml.safe_load((ROOT / "models.yaml").read_text())
    models["models"].reverse()
    assert _inputs(run("prod", _copy_project(tmp_path, models))) == _inputs(runs["prod"])


def test_adding_an_llm_changes_no_existing_resource(runs, tmp_path):
    models = yaml.safe_load((ROOT / "models.yaml").read_text())
    extra = dict(next(m for m in models["models"] if m["name"] == "llama-3-1-8b-instruct"), name="qwen-7b-chat",
                 architecture="qwen2.5-7b", artifact="Qwen/Qwen2.5-7B-Instruct")
    models["models"].append(extra)
    before, after = _inputs(runs["prod"]), _inputs(run("prod", _copy_project(tmp_path, models)))
    changed = sorted(k for k in before if k in after and before[k] != after[k])
    # the LLM node group grows and the stack's cost output changes; no workload of another model does
    assert all(t in ("aws:eks/nodeGroup:NodeGroup",) for t, _ in changed), changed
    assert set(before) <= set(after) and any("qwen-7b-chat" in name for _, name in after)


def test_compile_errors_end_the_program_as_run_error(tmp_path):
    models = yaml.safe_load((ROOT / "models.yaml").read_text())
    models["models"][0]["sla"]["p99_latency_ms"] = 0.5
    result = run_program(str(_copy_project(tmp_path, models)), "prod", stack_config("prod"))
    assert result.error and "modelfleet could not compile models.yaml" in result.error
    assert "models[0].sla.p99_latency_ms" in result.error
