"""The CLI: commands, exit codes, the schema file kept in sync."""

from __future__ import annotations

import json
import subprocess
import sys

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
    assert "why: cheapest layout that fits" in result.stdout
    assert "not p4d.24xlarge" in result.stdout


def test_unknown_stack_is_a_clean_error():
    result = run("plan", "--stack", "qa")
    assert result.returncode == 2
    assert "no stack named 'qa'" in result.stderr and "Traceback" not in result.stderr


def test_schema_file_is_current():
    assert (ROOT / "models.schema.json").read_text() == render_schema(), "run: modelfleet schema > models.schema.json"
    assert (ROOT / "models.yaml").read_text().startswith("# yaml-language-server: $schema=./models.schema.json")
