"""`modelfleet preview --stack NAME`: the README's main job, offline."""

from __future__ import annotations

import re
import shutil
import time

import yaml

from modelfleet.cli import main
from modelfleet.render.k8s import vllm_models
from tests.components.mocked import example_models
from modelfleet.project import Project
from tests.conftest import ROOT


def preview(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["--project", str(ROOT), "preview", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_prod_preview_lists_what_the_plan_describes(capsys, plans):
    started = time.perf_counter()
    code, out, _ = preview(capsys, "--stack", "prod")
    assert code == 0 and time.perf_counter() - started < 20
    plan = plans["prod"]
    names = set()
    for group in plan.node_groups:
        zones = [(f"{group.name}-{z.zone}", (z.min_size, z.desired_size, z.max_size)) for z in group.zonal]
        for name, sizes in zones or [(group.name, (group.min_size, group.desired_size, group.max_size))]:
            line = next(line for line in out.splitlines() if re.search(rf"aws:eks:NodeGroup {name}(\s|$)", line))
            assert f"{group.instance_type} ON_DEMAND" in line and "[protected" in line
            assert "nodes {}/{}/{}".format(*sizes) in line
            names.add(name)
    for server in plan.triton_servers:
        assert f"+ TritonServer {server.name}" in out and f"$ {' '.join(server.args)}" in out
    for model in vllm_models(plan):
        kind = "LeaderWorkerSet" if model.nodes_per_replica > 1 else (
            "Rollout" if model.rollout.strategy == "canary" else "Deployment")
        assert f"+ VllmDeployment {model.name}" in out and f"k8s:{kind} {plan.namespace}/{model.name}" in out
    outputs = yaml.safe_load(out.split("\noutputs:\n", 1)[1])
    assert set(outputs["node_groups"]) == names
    assert outputs["monthly_cost_usd"]["desired"] > 0
    assert "hf_offline_preview_placeholder" not in out and "data: none (modelfleet:hfToken is not set)" in out


def test_preview_runs_the_program_on_the_given_catalogue(capsys, tmp_path):
    models = example_models()
    models["models"] = [m for m in models["models"] if m["name"] != "llama-3-1-405b-instruct"]
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(models, sort_keys=False))
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    code, out, _ = preview(capsys, "--stack", "prod", "--models", str(path))
    assert code == 0 and "llama-3-1-405b-instruct" not in out and "llama-3-1-8b-instruct" in out


def test_preview_reports_compile_errors_like_every_command(capsys, tmp_path):
    models = example_models()
    models["models"][1]["sla"]["p99_latency_ms"] = 0.5
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(models, sort_keys=False))
    code, out, err = preview(capsys, "--stack", "prod", "--models", str(path))
    assert code == 2 and out == ""
    assert re.search(r"models\.yaml:\d+:\d+: models\[1\]\.sla\.p99_latency_ms", err)


def test_preview_stdout_is_deterministic_and_the_timing_goes_to_stderr(capsys):
    first = preview(capsys, "--stack", "dev")
    second = preview(capsys, "--stack", "dev")
    assert first[0] == second[0] == 0 and first[1] == second[1]
    assert " s)" not in first[1] and re.search(r"^preview ran in \d+\.\d s$", first[2], re.M)
    assert "as a first deploy (no node groups running)" in first[1]


def test_preview_outside_a_pulumi_project_is_a_clean_error(capsys, tmp_path):
    """Defect 5: a project of models.yaml and stacks/ alone (no Pulumi program) crashed with a traceback."""
    (tmp_path / "models.yaml").write_text((ROOT / "models.yaml").read_text())
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    code = main(["--project", str(tmp_path), "preview", "--stack", "dev"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.splitlines()[0].startswith(f"{tmp_path / '__main__.py'}: no Pulumi program here: `preview` runs the "
                                          "project's __main__.py")
    assert "Pulumi.yaml" in err.splitlines()[0] and "modelfleet init" in err.splitlines()[0]


def test_preview_warns_when_the_stack_has_no_hf_token(capsys, tmp_path):
    """Defect 6: the README says a preview warns about a missing modelfleet:hfToken; it never did (a stand-in
    token was always passed). With the stack's encrypted token, the stand-in goes in its place."""
    code, out, err = preview(capsys, "--stack", "prod")
    assert code == 0
    assert re.search(r"^warning: modelfleet:hfToken is not set: llama-3-1-405b-instruct, .* `pulumi up` will stop "
                     r"until it is set \(pulumi config set --secret modelfleet:hfToken", err, re.M)
    assert "data: none (modelfleet:hfToken is not set)" in out
    project = tmp_path / "project"
    shutil.copytree(ROOT, project, ignore=shutil.ignore_patterns(".*", "tests", "bench", "examples", "docs"))
    stack = project / "stacks" / "Pulumi.prod.yaml"
    stack.write_text(stack.read_text() + "  modelfleet:hfToken:\n    secure: v1:AAAABBBBCCCC:DDDDEEEEFFFF\n")
    code = main(["--project", str(project), "preview", "--stack", "prod"])
    out, err = capsys.readouterr()
    assert code == 0 and "hfToken" not in err and "data: [secret]" in out
    assert "v1:AAAABBBBCCCC" not in out and "hf_offline_preview_placeholder" not in out


def test_preview_base_names_a_version_bump_and_rolls_that_server_alone(capsys, tmp_path):
    """#15: fraud-scorer 1 -> 2 against the example: its server's Rollout changes (with its configs' new
    revision in S3, the old one retained), nothing else."""
    text = (ROOT / "models.yaml").read_text()
    pinned = "    artifact: s3://acme-ml-models/triton/fraud-scorer\n    version: 1\n"
    path = tmp_path / "models.yaml"
    path.write_text(text.replace(pinned, pinned.replace("version: 1", "version: 2")))
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    code, out, _ = preview(capsys, "--stack", "prod", "--models", str(path), "--base", str(ROOT / "models.yaml"))
    assert code == 0
    lines = out.splitlines()
    server = Project(root=str(ROOT)).plan("prod").model("fraud-scorer").server
    assert f"  fraud-scorer: version 1 -> 2, rolls {server} alone as a canary 10% -> 100%, 10 min each, " \
           "gated by its SLA analysis" in lines
    updated = [line.split()[1:3] for line in lines if line.startswith("  ~ ")]
    assert updated == [["k8s:Rollout", f"modelfleet/{server}"]], out
    others = [line for line in lines if line.startswith(("  + ", "  - ", "  +- "))]
    assert others and all(f"BucketObjectv2 {server}-" in line for line in others), others
