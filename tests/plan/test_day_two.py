"""Pins, canaries and version bumps (#15), at the level of the compiler: spec errors, plan decisions, diffs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from modelfleet.commands.digest import load_folder_digest
from modelfleet.errors import CompileError, SpecError
from modelfleet.plan.changes import rolling_workloads, version_change
from modelfleet.plan.serving.engine_args import vllm_serve_args
from modelfleet.plan.capacity.rollout import _basic_split, canary_replicas
from modelfleet.plan.llm.weights import weights_plan
from modelfleet.project import Project
from modelfleet.spec.digest import DIGEST_PIPELINE
from modelfleet.spec.environment import DeploySettings
from tests.conftest import ROOT

REV = "0e9e39f249a16976918f6564b8830bc894c89659"


def copy_project(tmp_path: Path, edit=None, stack_edit: dict | None = None, stack: str = "prod") -> Project:
    shutil.copy(ROOT / "models.yaml", tmp_path / "models.yaml")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    if edit:
        text = (tmp_path / "models.yaml").read_text()
        (tmp_path / "models.yaml").write_text(edit(text))
    if stack_edit:
        path = tmp_path / "stacks" / f"Pulumi.{stack}.yaml"
        data = yaml.safe_load(path.read_text())
        data["config"].update(stack_edit)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    return Project(root=str(tmp_path))


def unpin_fraud_scorer(text: str) -> str:
    marker = "    artifact: s3://acme-ml-models/triton/fraud-scorer\n    version: 1\n"
    assert marker in text
    return text.replace(marker, "    artifact: s3://acme-ml-models/triton/fraud-scorer\n")


# ---------------------------------------------------------------------------------------------- pins
def test_an_unpinned_model_fails_a_stack_that_requires_pins_and_warns_elsewhere(tmp_path):
    project = copy_project(tmp_path, unpin_fraud_scorer)
    with pytest.raises(CompileError) as failed:
        project.plan("prod")
    (issue,) = failed.value.issues
    assert issue.path.endswith(".version") and "fraud-scorer is not pinned, and stack prod requires pins" in issue.message
    assert issue.fix.startswith("pin the version folder: version: 1")
    warnings = [w.message for w in project.plan("dev").warnings if w.model == "fraud-scorer"]
    assert any(w.startswith("not pinned: Triton loads whatever version folders") for w in warnings)


@pytest.mark.parametrize("line, message", [
    ("    revision: main\n", "'main' is not a commit: a branch or tag of a Hub repository moves"),
    ("    revision: 0e9e39f\n", "is not a commit"),
])
def test_a_hub_revision_must_be_a_commit(tmp_path, line, message):
    def edit(text: str) -> str:
        return text.replace(f"    revision: {REV}", line.rstrip("\n"))
    with pytest.raises(SpecError, match=message):
        copy_project(tmp_path, edit).fleet()


def test_a_pinned_hub_model_reads_its_commit_and_an_s3_model_its_sub_prefix(project):
    plan = project.plan("prod")
    hub = plan.model("llama-3-1-8b-instruct")  # staged: the weights and tokenizer are read from its commit's copy
    assert hub.args[2] == f"s3://acme-modelfleet-prod-model-repository/weights/meta-llama/Llama-3.1-8B-Instruct/{REV}"
    assert "--revision" not in hub.args
    downloaded = weights_plan(artifact=hub.artifact, revision=REV, checkpoint_gib=15.0, tp=1, pp=1,
                              environment="prod", deploy=DeploySettings(stage_hub_weights=False))
    assert downloaded.source == "hub"  # read from the Hub by each pod: vLLM is given the commit
    args = vllm_serve_args(artifact=downloaded.uri, served_name="m", tp=1, pp=1, max_model_len=8192, max_num_seqs=8,
                           gpu_memory_utilization=0.9, dtype="bfloat16", quantization=None, kv_cache_dtype="auto",
                           prefix_caching=True, revision=REV)
    assert args[args.index("--revision") + 1] == args[args.index("--tokenizer-revision") + 1] == REV
    s3 = plan.model("llama-3-3-70b-instruct")
    assert s3.artifact == "s3://acme-ml-models/hf/Llama-3.3-70B-Instruct/2024-12-06" == s3.args[2]
    assert "--revision" not in s3.args


SUPPORT_PIN = "\n          revision: 7fe814e892ccb94e1adff30c17db2e5174962688"


def unpin_support_adapter(text: str) -> str:
    assert SUPPORT_PIN in text
    return text.replace(SUPPORT_PIN, "")


def test_an_unpinned_lora_adapter_fails_a_stack_that_requires_pins_and_warns_elsewhere(tmp_path):
    """vLLM fetches an adapter named by its Hub id from the main branch (it takes no revision for adapters), so an
    unpinned adapter is what an unpinned checkpoint is."""
    project = copy_project(tmp_path, unpin_support_adapter)
    with pytest.raises(CompileError) as failed:
        project.plan("prod")
    (issue,) = failed.value.issues
    assert issue.path.endswith(".lora.adapters[0].revision"), issue.path
    assert issue.line > 0 and "adapter support-tone (acme-ml/llama-3.1-8b-support-tone-lora)" in issue.message
    assert issue.fix == "pin the adapter repository's commit: revision: <40-hex sha>"
    dev = project.plan("dev")
    assert any(w.message.startswith("not pinned: adapter support-tone") for w in dev.warnings)
    args = dev.model("llama-3-1-8b-instruct").args
    assert "support-tone=acme-ml/llama-3.1-8b-support-tone-lora" in args  # vLLM fetches it itself
    assert "billing-tools=/root/.cache/huggingface/lora/billing-tools" in args


def test_a_pinned_lora_adapter_is_downloaded_at_its_commit_and_loaded_from_disk(project):
    plan = project.plan("prod")
    model = plan.model("llama-3-1-8b-instruct")
    modules = model.args[model.args.index("--lora-modules") + 1:][:2]
    assert modules == ("support-tone=/root/.cache/huggingface/lora/support-tone",
                       "billing-tools=/root/.cache/huggingface/lora/billing-tools")
    text = project.rendered("prod")[1]["kubernetes/llama-3-1-8b-instruct.yaml"].decode()
    download = next(d for d in yaml.safe_load_all(text) if d["kind"] in ("Deployment", "Rollout"))
    init = next(c for c in download["spec"]["template"]["spec"]["initContainers"] if c["name"] == "model-download")
    script = init["command"][-1]
    assert ("snapshot_download('acme-ml/llama-3.1-8b-support-tone-lora', revision='7fe814e892ccb94e1adff30c17db2e5174962688', "
            "local_dir='/root/.cache/huggingface/lora/support-tone')") in script


def test_pinned_adapters_on_an_s3_checkpoint_get_the_download_step_and_the_token(tmp_path):
    """The 70B streams from S3 (no download step, no token); adapters from the Hub bring both."""
    adapter = ("    lora:\n      adapters:\n        - {name: legal, artifact: acme-ml/llama-3.3-70b-legal-lora, "
               "revision: " + "c" * 40 + "}\n")

    def edit(text: str) -> str:
        marker = "  - name: llama-3-3-70b-instruct\n"
        head, tail = text.split(marker)
        return head + marker + tail.replace("    sla:", adapter + "    sla:", 1)
    project = copy_project(tmp_path, edit)
    model = project.plan("prod").model("llama-3-3-70b-instruct")
    assert model.lora_downloads == (("/root/.cache/huggingface/lora/legal", "acme-ml/llama-3.3-70b-legal-lora", "c" * 40),)
    assert [c.name for c in model.pod.containers][0] == "model-download"
    text = project.rendered("prod")[1]["kubernetes/llama-3-3-70b-instruct.yaml"].decode()
    pod = next(d for d in yaml.safe_load_all(text) if d["kind"] in ("Deployment", "Rollout"))["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    assert "snapshot_download('acme-ml/llama-3.3-70b-legal-lora'" in init["command"][-1]
    assert "Llama-3.3-70B" not in init["command"][-1]  # the checkpoint itself still streams from S3
    assert any(v["name"] == "hf-token" for v in pod["volumes"])
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["HF_TOKEN_PATH"].endswith("/token") and "AWS_REGION" in env


def test_version_and_versions_together_are_refused(tmp_path):
    def edit(text: str) -> str:
        return text.replace("    version: 1\n    # New weights", "    version: 1\n    versions: [1, 2]\n    # New weights")
    with pytest.raises(SpecError, match="give version .* or versions"):
        copy_project(tmp_path, edit).fleet()


def test_the_pod_and_modelfleet_digest_agree_on_a_folder(tmp_path):
    folder = tmp_path / "2"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.onnx").write_bytes(b"\x00weights" * 1000)
    (folder / "sub" / "B.txt").write_text("b")
    (folder / "sub" / "a.txt").write_text("a")
    shell = subprocess.run(["/bin/sh", "-c", DIGEST_PIPELINE], cwd=folder, capture_output=True, text=True, check=True)
    assert shell.stdout.strip() == load_folder_digest(folder)
    (folder / "sub" / "a.txt").write_text("changed")
    assert load_folder_digest(folder) != shell.stdout.strip()


def test_a_pinned_digest_is_checked_by_the_init_container(tmp_path):
    sha = "ab" * 32

    def edit(text: str) -> str:
        return text.replace("    version: 1\n    # New weights", f"    version: {{number: 2, sha256: {sha}}}\n    # New weights")
    project = copy_project(tmp_path, edit)
    files = project.rendered("prod")[1]
    server = project.plan("prod").model("fraud-scorer").server
    text = files[f"kubernetes/{server}.yaml"].decode()
    assert "s3://acme-ml-models/triton/fraud-scorer/2/" in text and sha in text
    assert "s3://acme-ml-models/triton/fraud-scorer/1/" not in text


# ---------------------------------------------------------------------------------------------- rollouts
@pytest.mark.parametrize("rollout, message", [
    ("{strategy: canary, steps: [50, 10, 100]}", "steps must increase"),
    ("{strategy: canary, steps: [10, 50]}", "the last step is 50%: a canary ends with all the traffic"),
    ("{strategy: canary, pause: 30s}", "pause 30s is outside 1m to 24h"),
    ("{strategy: rolling, steps: [10, 100]}", "steps applies to strategy: canary only"),
    ("{strategy: canary, pause: 10 minutes}", "pause"),
])
def test_a_bad_rollout_is_a_located_error(tmp_path, rollout, message):
    def edit(text: str) -> str:
        return text.replace("rollout: {strategy: canary, steps: [10, 100], pause: 10m}", f"rollout: {rollout}")
    with pytest.raises(SpecError, match=message) as failed:
        copy_project(tmp_path, edit).fleet()
    line = next(n for n, text in enumerate((ROOT / "models.yaml").read_text().splitlines(), 1)
                if "rollout: {strategy: canary, steps: [10, 100], pause: 10m}" in text)
    assert f"models.yaml:{line}:" in str(failed.value) and "models[2].rollout" in str(failed.value)


def test_argo_rollouts_replica_arithmetic():
    """Against Argo Rollouts' own approximateWeightedCanaryStableReplicaCounts (maxSurge 1) and its
    traffic-routed counts with dynamicStableScale."""
    assert [_basic_split(r, 10) for r in (1, 2, 3, 4, 10)] == [(1, 2), (1, 3), (1, 4), (1, 5), (1, 10)]
    assert [_basic_split(r, 50) for r in (2, 3, 4)] == [(1, 2), (2, 4), (2, 4)]
    assert canary_replicas(10, (10, 100), gateway=False) == 1
    # with a gateway, the stable keeps the previous step's share until the traffic moves: 10 -> 100 nearly doubles
    assert canary_replicas(4, (10, 100), gateway=True) == 4
    assert canary_replicas(4, (10, 50, 100), gateway=True) == 2


def test_a_canary_is_the_workloads_surge_and_the_fit_holds_it(project):
    plan = project.plan("prod")
    server = plan.server(plan.model("fraud-scorer").server)
    assert (server.rollout.strategy, server.rollout.steps, server.rollout.pause_s) == ("canary", (10, 100), 600)
    group = plan.node_group(server.node_group)
    assert group.max_size >= server.max_replicas + server.rollout.max_surge


def test_a_multi_node_canary_is_refused_or_falls_back_with_a_warning(tmp_path):
    project = copy_project(tmp_path, stack_edit={"modelfleet:rollout": {"strategy": "canary"}})
    plan = project.plan("prod")
    big = plan.model("llama-3-1-405b-instruct")
    assert big.nodes_per_replica > 1 and big.rollout.strategy == "rolling"
    assert any("a canary needs single-node replicas" in w.message for w in plan.warnings if w.model == big.name)

    def edit(text: str) -> str:
        return text.replace("    revision: 069992c75aed59df00ec06c17177e76c63296a26",
                            "    revision: 069992c75aed59df00ec06c17177e76c63296a26\n    rollout: {strategy: canary}")
    with pytest.raises(CompileError, match="a canary needs single-node replicas"):
        (tmp_path / "own").mkdir()
        copy_project(tmp_path / "own", edit).plan("prod")


# ---------------------------------------------------------------------------------------------- version bumps
def test_a_version_bump_rolls_that_server_alone(project, tmp_path):
    def bump(text: str) -> str:
        return text.replace("    artifact: s3://acme-ml-models/triton/fraud-scorer\n    version: 1\n",
                            "    artifact: s3://acme-ml-models/triton/fraud-scorer\n    version: 2\n")
    before, after = project.plan("prod"), copy_project(tmp_path, bump).plan("prod")
    server = after.model("fraud-scorer").server
    assert rolling_workloads(before, after) == [server]
    assert version_change("fraud-scorer", before, after) == (
        f"fraud-scorer: version 1 -> 2, rolls {server} alone as a canary 10% -> 100%, 10 min each, gated by its SLA "
        "analysis")
    assert version_change("text-embedder", before, after) is None
