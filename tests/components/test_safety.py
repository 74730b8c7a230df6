"""What keeps a deploy safe: secrets stay secret, prod is protected, names are stable, errors stop early."""

from __future__ import annotations

import json

import pytest

from modelfleet.preview.format import is_secret
from modelfleet.preview.runner import run_program
from modelfleet.render.k8s import vllm_models
from tests.components.mocked import (
    SUBNETS,
    TOKEN,
    copy_project,
    created_cluster,
    example_models,
    of_type,
    run,
    stack_config,
)
from tests.conftest import ROOT

PROTECTED = ("aws:eks/nodeGroup:NodeGroup", "aws:s3/bucket:Bucket")


def test_the_hf_token_stays_secret(runs):
    result = runs["prod"]
    secrets = of_type(result, "kubernetes:core/v1:Secret")
    assert secrets
    for secret in secrets.values():
        assert is_secret(secret.inputs["stringData"]), "the token travels as a Pulumi secret"
        assert secret.inputs["stringData"]["value"] == {"token": TOKEN}
    others = [r.inputs for r in result.resources if r.type != "kubernetes:core/v1:Secret"]
    assert TOKEN not in json.dumps(others) and TOKEN not in json.dumps(result.outputs, default=str)


def test_prod_is_protected_and_dev_is_not(runs):
    for stack, expected in (("prod", True), ("dev", False)):
        protected = {(r.type, r.name): r.protect for r in runs[stack].resources if r.type in PROTECTED}
        assert {t for t, _ in protected} == set(PROTECTED)
        assert all(p is expected for p in protected.values()), stack
    assert not any(r.protect for r in runs["prod"].resources if r.type.startswith("kubernetes:"))


def test_the_repository_bucket_keeps_its_first_address(runs):
    """The bucket moved under the ModelRepository component; an alias keeps the (protected) bucket."""
    bucket = of_type(runs["prod"], "aws:s3/bucket:Bucket")["model-repository"]
    assert {"noParent": True} in bucket.aliases and "ModelRepository" in bucket.parent


def test_a_created_cluster_is_protected_and_runs_the_pod_identity_agent():
    result = run("prod", config=created_cluster("prod"))
    cluster = of_type(result, "aws:eks/cluster:Cluster")["cluster-eks"]
    assert cluster.protect and cluster.inputs["name"] == "ml-prod"
    assert cluster.inputs["vpcConfig"]["subnetIds"] == SUBNETS
    assert cluster.inputs["accessConfig"]["authenticationMode"] == "API"
    assert of_type(result, "aws:eks/addon:Addon")["cluster-pod-identity-agent"].inputs["addonName"] == "eks-pod-identity-agent"
    groups = of_type(result, "aws:eks/nodeGroup:NodeGroup")
    assert {tuple(g.inputs["subnetIds"]) for n, g in groups.items() if "-zone-" not in n} == {tuple(SUBNETS)}
    assert {tuple(g.inputs["subnetIds"]) for n, g in groups.items() if "-zone-" in n} == {(s,) for s in SUBNETS}
    assert not any(r.type == "aws:eks/cluster:Cluster" for r in run("dev").resources)


def test_a_created_clusters_api_answers_only_the_listed_cidrs():
    public = of_type(run("prod", config=created_cluster("prod")), "aws:eks/cluster:Cluster")["cluster-eks"]
    assert public.inputs["vpcConfig"]["endpointPublicAccess"] is True
    assert public.inputs["vpcConfig"]["publicAccessCidrs"] == ["203.0.113.0/24"]
    private = of_type(run("prod", config=created_cluster("prod", publicAccessCidrs=[])), "aws:eks/cluster:Cluster")
    assert private["cluster-eks"].inputs["vpcConfig"]["endpointPublicAccess"] is False
    assert private["cluster-eks"].inputs["vpcConfig"]["endpointPrivateAccess"] is True
    assert "publicAccessCidrs" not in private["cluster-eks"].inputs["vpcConfig"]


@pytest.mark.parametrize(("cidrs", "expected"), [
    (None, "needs its API endpoint's access stated"),
    (["0.0.0.0/0"], "publicAccessCidrs[0]: the API endpoint would be open to the internet"),
    (["203.0.113.0/24", "::/0"], "publicAccessCidrs[1]: the API endpoint would be open to the internet"),
    (["203.0.113.7/24"], "publicAccessCidrs[0]: '203.0.113.7/24' is not a CIDR"),
])
def test_a_created_cluster_is_never_open_to_the_internet_by_default(cidrs, expected):
    config = created_cluster("prod")
    if cidrs is None:
        config["modelfleet:cluster"].pop("publicAccessCidrs")
    else:
        config["modelfleet:cluster"]["publicAccessCidrs"] = cidrs
    result = run("prod", config=config, expect_error=True)
    assert f"config.modelfleet:cluster.{expected}" in result.error if "publicAccessCidrs[" in expected else expected in result.error
    assert not any(r.custom for r in result.resources)


def test_a_created_cluster_without_subnets_stops_before_anything_is_created():
    config = stack_config("dev", **{"modelfleet:cluster": {"create": True, "publicAccessCidrs": []}})
    result = run_program(str(ROOT), "dev", config)
    assert result.error and "config.modelfleet:cluster.subnetIds" in result.error
    assert not any(r.custom for r in result.resources)


def test_compile_errors_end_the_program_as_run_error(tmp_path):
    models = example_models()
    models["models"][0]["sla"]["p99_latency_ms"] = 0.5
    result = run_program(str(copy_project(tmp_path, models)), "prod", stack_config("prod"))
    assert result.error and result.error.startswith("modelfleet cannot deploy stack prod:")
    assert "models.yaml:" in result.error and "models[0].sla.p99_latency_ms" in result.error
    assert not any(r.custom for r in result.resources), "nothing is created"


def _inputs(result) -> dict:
    return {(r.type, r.name): (r.inputs, r.parent, r.protect, r.ignore_changes) for r in result.resources}


def test_reordering_models_changes_nothing(runs, tmp_path):
    models = example_models()
    models["models"].reverse()
    assert _inputs(run("prod", copy_project(tmp_path, models))) == _inputs(runs["prod"])


def test_adding_an_llm_changes_no_existing_resource(runs, tmp_path):
    models = example_models()
    extra = dict(next(m for m in models["models"] if m["name"] == "llama-3-1-8b-instruct"), name="qwen-7b-chat",
                 architecture="qwen2.5-7b", artifact="Qwen/Qwen2.5-7B-Instruct")
    models["models"].append(extra)
    before, after = _inputs(runs["prod"]), _inputs(run("prod", copy_project(tmp_path, models)))
    assert set(before) <= set(after) and any("qwen-7b-chat" in name for _, name in after)
    # the fleet overview dashboard lists every model, so it gains the new one
    overview = ("kubernetes:core/v1:ConfigMap", "configmap-modelfleet-modelfleet-fleet-dashboard")
    changed = sorted(key for key in before if before[key] != after[key] and key != overview)
    # its node group grows (the stack resource only carries outputs); no other workload's object changes
    assert {t for t, _ in changed} <= {"aws:eks/nodeGroup:NodeGroup", "pulumi:pulumi:Stack"}, changed
    group = next(k for k in changed if k[0] == "aws:eks/nodeGroup:NodeGroup")
    assert before[group][0]["scalingConfig"] != after[group][0]["scalingConfig"]


def test_without_a_token_a_preview_warns_and_a_deploy_stops(runs, plans):
    """Gated meta-llama models cannot download without the token: `pulumi up` stops before creating anything;
    a preview (and the offline `modelfleet preview`) still runs, and says so."""
    preview = run("dev", token=None)
    hub = sorted(m.name for m in vllm_models(plans["dev"]) if not m.artifact.startswith("s3://"))
    secrets = of_type(preview, "kubernetes:core/v1:Secret")
    assert hub and len(secrets) == len(hub) and all("stringData" not in s.inputs for s in secrets.values())
    warning = next(text for level, text in preview.messages if "hfToken" in text)
    assert warning.startswith(f"modelfleet:hfToken is not set: {', '.join(hub)} download from the Hugging Face hub")
    deploy = run("dev", token=None, dry_run=False, expect_error=True)
    assert "config.modelfleet:hfToken: modelfleet:hfToken is not set" in deploy.error
    assert "pulumi config set --secret modelfleet:hfToken" in deploy.error
    assert not any(r.custom for r in deploy.resources), "nothing is created"
    assert run("dev", dry_run=False).error is None  # with the token, the same deploy goes ahead
    plan_warnings = {("warning", f"{w.model}: {w.message}") for w in plans["dev"].warnings}
    assert plan_warnings and plan_warnings <= set(runs["dev"].messages)
    assert not any("hfToken" in text for _, text in runs["dev"].messages)


def test_the_token_secret_keeps_its_first_address(runs):
    """Its logical name is kind-namespace-name now, like every object's; an alias keeps the existing Secret."""
    secrets = of_type(runs["prod"], "kubernetes:core/v1:Secret")
    for name, secret in secrets.items():
        meta = secret.inputs["metadata"]
        assert name == f"secret-{meta['namespace']}-{meta['name']}"
        assert {"name": meta["name"]} in [{k: v for k, v in a.items() if k == "name"} for a in secret.aliases]
