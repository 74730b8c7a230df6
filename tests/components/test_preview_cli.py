"""`modelfleet preview --stack NAME`: the README's main job, offline."""

from __future__ import annotations

import re
import time

import yaml

from modelfleet.cli import main
from modelfleet.render.k8s import vllm_models
from tests.components.mocked import example_models
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
        kind = "LeaderWorkerSet" if model.nodes_per_replica > 1 else "Deployment"
        assert f"+ VllmDeployment {model.name}" in out and f"k8s:{kind} {plan.namespace}/{model.name}" in out
    outputs = yaml.safe_load(out.split("\noutputs:\n", 1)[1])
    assert set(outputs["node_groups"]) == names
    assert outputs["monthly_cost_usd"]["desired"] > 0
    assert "hf_offline_preview_placeholder" not in out and "data: [secret]" in out


def test_preview_runs_the_program_on_the_given_catalogue(capsys, tmp_path):
    models = example_models()
    models["models"] = [m for m in models["models"] if m["name"] != "llama-3-1-405b-instruct"]
    path = tmp_path / "models.yaml"
    path.write_text(yaml.safe_dump(models, sort_keys=False))
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
