"""The CLI: commands, exit codes, the schema file kept in sync."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from modelfleet.commands.schema import render_schema
from tests.conftest import ROOT


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(ROOT), *args],
                          capture_output=True, text=True, cwd=ROOT)


def test_validate_example():
    result = run("validate")
    assert result.returncode == 0, result.stderr
    assert "7 models valid" in result.stdout


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
    assert "why: cheapest layout that fits" in result.stdout
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

    model = next(m for m in plans["prod"].models if isinstance(m, TritonModelPlan))
    lines = {share: _model_lines(model.model_copy(update={"gpu_share": share}))[0]
             for share in (3.5714, 1.0, 0.25, 0.004)}
    assert lines[3.5714].endswith("3.6 GPUs") and "%" not in lines[3.5714].rsplit("cache", 1)[1]
    assert lines[1.0].endswith("1 GPU")
    assert lines[0.25].endswith("25% of a GPU")
    assert lines[0.004].endswith("0.4% of a GPU")
