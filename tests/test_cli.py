"""The CLI: commands, exit codes, the schema file kept in sync."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from modelfleet.commands.schema import render_schema
from tests.conftest import ROOT


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(ROOT), *args],
                          capture_output=True, text=True, cwd=ROOT)


def test_validate_example():
    result = run("validate")
    assert result.returncode == 0, result.stderr
    assert "8 models valid" in result.stdout


def test_plan_json_contract():
    result = run("plan", "--stack", "prod", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    for group in plan["node_groups"]:
        assert {"name", "instance_type", "capacity_type", "min_size", "desired_size", "max_size", "gpus_per_node",
                "gpu_memory_gib"} <= set(group)
    for model in plan["models"]:
        assert {"name", "serving", "instance_type", "replicas", "gpus_per_replica", "weights_gib"} <= set(model)
        if model["serving"] == "triton" and "server" in model:
            assert {"server", "max_batch_size", "queue_timeout_us", "max_queue_delay_us", "response_cache"} <= set(model)
        else:
            assert {"tensor_parallel_size", "pipeline_parallel_size", "max_num_seqs", "max_model_len", "kv_cache_gib",
                    "args"} <= set(model)


def test_plan_text_explains_choices():
    result = run("plan", "--stack", "prod")
    assert result.returncode == 0, result.stderr
    assert "Cheapest layout that meets the SLA at peak" in result.stdout
    assert result.stdout.count("estimates: 1,500 simulated requests of ") == 3  # every LLM, simulated under its traffic
    assert "not p4d.24xlarge" in result.stdout


def test_unknown_stack_is_a_clean_error():
    result = run("plan", "--stack", "qa")
    assert result.returncode == 2
    assert "no stack named 'qa'" in result.stderr and "Traceback" not in result.stderr


def test_schema_file_is_current():
    assert (ROOT / "models.schema.json").read_text() == render_schema(), "run: modelfleet schema > models.schema.json"
    assert (ROOT / "models.yaml").read_text().startswith("# yaml-language-server: $schema=./models.schema.json")


def _project_without_stacks(tmp_path, stacks_dir: bool) -> str:
    """The example's models.yaml alone (a newcomer's first project), with or without an empty stacks/."""
    (tmp_path / "models.yaml").write_text((ROOT / "models.yaml").read_text())
    if stacks_dir:
        (tmp_path / "stacks").mkdir()
    return str(tmp_path)


@pytest.mark.parametrize("stacks_dir", [False, True])
@pytest.mark.parametrize("command", [("validate",), ("plan", "--stack", "dev"), ("cost",),
                                     ("cost", "--format", "markdown"), ("render", "--stack", "dev", "--out", "out")])
def test_a_project_without_stacks_is_refused(tmp_path, command, stacks_dir):
    """Defect 4: `cost` printed an empty report (a green, empty PR comment), `validate` said "stacks checked:
    none" and `plan` "use one of: none"."""
    root = _project_without_stacks(tmp_path, stacks_dir)
    result = subprocess.run([sys.executable, "-m", "modelfleet", "--project", root, *command],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"{os.path.join(root, 'stacks')}: ")
    assert ("no stacks directory" if not stacks_dir else "no stack file") in first
    assert "stacks/Pulumi.<env>.yaml" in first
    assert not (tmp_path / "out").exists()


def test_plan_text_says_how_many_gpus_a_model_needs(plans):
    """Defect 13: "GPU share 357%" for a model that needs several GPUs; a fraction stays a percentage."""
    from modelfleet.commands.plan import _model_lines
    from modelfleet.plan.types import TritonModelPlan

    model = next(m for m in plans["prod"].models if isinstance(m, TritonModelPlan) and m.device == "gpu")
    lines = {share: _model_lines(model.model_copy(update={"gpu_share": share}))[0]
             for share in (3.5714, 1.0, 0.25, 0.004)}
    assert lines[3.5714].endswith("3.6 GPUs") and "%" not in lines[3.5714].rsplit("cache", 1)[1]
    assert lines[1.0].endswith("1 GPU")
    assert lines[0.25].endswith("25% of a GPU")
    assert lines[0.004].endswith("0.4% of a GPU")


def _broken_project(tmp_path, p99: bool = False, budget: bool = False) -> Path:
    """The example with a model no stack can serve (p99 0.5 ms), or a prod budget the plan exceeds."""
    root = tmp_path / "project"
    root.mkdir()
    models = yaml.safe_load((ROOT / "models.yaml").read_text())
    if p99:
        models["models"][1]["sla"]["p99_latency_ms"] = 1
    (root / "models.yaml").write_text(yaml.safe_dump(models, sort_keys=False))
    shutil.copytree(ROOT / "stacks", root / "stacks")
    shutil.copytree(ROOT / "samples", root / "samples")  # warmup samples models.yaml names
    prod = root / "stacks" / "Pulumi.prod.yaml"
    if budget:
        prod.write_text(prod.read_text().replace("monthlyUsd: 250000", "monthlyUsd: 1000"))
    return root


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(root), *args], capture_output=True,
                          text=True, cwd=root)


def test_validate_reports_what_plan_would_refuse_in_every_stack(tmp_path):
    """Defect 10: `validate` passed what `plan` then refused (infeasible layouts, policies, budgets)."""
    root = _broken_project(tmp_path, budget=True)
    validate = _cli(root, "validate")
    assert validate.returncode == 2 and validate.stdout == ""
    lines = validate.stderr.splitlines()
    for stack in ("dev", "prod", "staging"):
        plan = _cli(root, "plan", "--stack", stack)
        problems = plan.stderr.splitlines()[:-1] if plan.returncode else []  # the last line is the count
        assert problems == [line.replace(_stack_tag(line), "") for line in lines[:-1] if stack in _stack_tag(line)]
    assert any("in stack prod: " in line and "budget" in line for line in lines)
    assert lines[-1] == "validate: 1 problem(s); these stacks compile: dev, staging; these do not: prod"


def test_a_problem_of_several_stacks_is_said_once(tmp_path):
    validate = _cli(_broken_project(tmp_path, p99=True), "validate")
    assert validate.returncode == 2
    *problems, summary = validate.stderr.splitlines()
    assert all("models[1].sla.p99_latency_ms: in stack" in p for p in problems)
    # prod and staging place it on the same GPU: one problem; dev's GPU is slower: its own figures
    assert [_stack_tag(p) for p in problems] == ["in stacks prod, staging: ", "in stack dev: "]
    assert summary == "validate: 2 problem(s); no stack compiles: dev, prod, staging"


def test_an_invalid_catalogue_says_no_stack_was_compiled(tmp_path):
    root = _broken_project(tmp_path)
    (root / "models.yaml").write_text((root / "models.yaml").read_text().replace("p99_latency_ms: 100", "p99_latency_ms: 0.5", 1))
    *problems, summary = _cli(root, "validate").stderr.splitlines()
    assert len(problems) == 1 and "1 to 600,000" in problems[0]
    assert summary == f"validate: 1 problem(s); no stack was compiled (dev, prod, staging): {root}/models.yaml must be valid first"


def _stack_tag(line: str) -> str:
    match = re.search(r"in stacks? [a-z, -]+: ", line)
    return match.group(0) if match else ""


def test_validate_names_the_stacks_it_compiled(project):
    result = run("validate")
    assert result.returncode == 0, result.stderr
    count = len(project.fleet().models)
    assert result.stdout.endswith(f"{count} models valid; every stack compiles: dev, prod, staging\n")
