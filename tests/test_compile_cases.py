"""Compiler behaviour on small catalogues: overrides, warnings and infeasible input."""

from __future__ import annotations

import json
import textwrap

import pytest

from modelfleet.catalogue import parse_fleet_text
from modelfleet.compiler import compile_fleet
from modelfleet.environment import EnvironmentSpec
from modelfleet.errors import CompileError
from modelfleet.render import render_fleet
from modelfleet.render_triton import parse_config

LLM = textwrap.dedent("""\
    models:
      - name: chat
        type: llm
        serving: {serving}
        artifact: meta-llama/Llama-3.1-8B-Instruct
        size: {{dtype: {dtype}}}
        architecture: {arch}
        sla: {{max_context_tokens: 8192, peak_concurrent_sequences: 16, p99_ttft_ms: {ttft}}}
    """)
PROD = EnvironmentSpec(name="prod", region="us-east-1")


def compile_text(text: str, env: EnvironmentSpec = PROD, catalogue=None):
    from modelfleet.instances import load_instance_catalogue

    return compile_fleet(parse_fleet_text(text), env, catalogue or load_instance_catalogue())


def test_llm_on_triton_renders_the_vllm_backend_with_a_warning():
    plan = compile_text(LLM.format(serving="triton", dtype="bf16", arch="llama-3.1-8b", ttft=2000))
    assert any("Triton's vLLM backend" in w.message for w in plan.warnings)
    files = render_fleet(plan)
    server = plan.triton_servers[0]
    config = parse_config(files[f"triton/{server.name}/chat/config.pbtxt"].decode())
    assert config.backend == "vllm" and config.model_transaction_policy.decoupled
    engine = json.loads(files[f"triton/{server.name}/chat/1/model.json"])
    assert engine["tensor_parallel_size"] == plan.model("chat").tensor_parallel_size
    assert "vllm/chat.json" not in files


def test_405b_that_fits_nowhere_says_how_to_fix():
    # g4dn/g5 could hold 756 GiB only across 5+ nodes, and then prefill is too slow for a 10 s TTFT
    env = EnvironmentSpec(name="dev", region="us-east-1", instance_families=("g4dn", "g5"))
    with pytest.raises(CompileError) as caught:
        compile_text(LLM.format(serving="vllm", dtype="bf16", arch="llama-3.1-405b", ttft=10000), env)
    issue = caught.value.issues[0]
    assert issue.path == "models[0]"
    assert "needs 756 GiB" in issue.message
    assert "allow" in issue.fix and "p5" in issue.fix and "fp8" in issue.fix


def test_tight_ttft_is_infeasible_with_reasons():
    with pytest.raises(CompileError) as caught:
        compile_text(LLM.format(serving="vllm", dtype="bf16", arch="llama-3.1-8b", ttft=10))
    assert "TTFT" in caught.value.issues[0].message


def test_fp8_kv_cache_and_weights_change_the_layout():
    bf16 = compile_text(LLM.format(serving="vllm", dtype="bf16", arch="llama-3.1-8b", ttft=2000)).model("chat")
    fp8 = compile_text(LLM.format(serving="vllm", dtype="fp8", arch="llama-3.1-8b", ttft=2000)).model("chat")
    assert fp8.weights_gib == pytest.approx(bf16.weights_gib / 2, abs=0.001)
    assert fp8.args[fp8.args.index("--dtype") + 1] == "auto"


CLASSIC = textwrap.dedent("""\
    models:
      - name: scorer
        type: tabular
        framework: {framework}
        artifact: s3://models-bucket/scorer
        size: {{memory_gib: 0.2}}
        inputs: [{{name: x, dtype: fp32, dims: [16]}}]
        outputs: [{{name: y, dtype: fp32, dims: [1]}}]
        sla: {{p99_latency_ms: {p99}, peak_rps: 100}}
        profile: {{compute_ms: {compute}}}
    """)


def test_sla_without_queue_budget_is_a_compile_error():
    # 40 ms measured on an A10G is 5.1 ms even on an H100 (x 125 / 989): nothing is left of a 5 ms p99
    with pytest.raises(CompileError) as caught:
        compile_text(CLASSIC.format(framework="onnx", p99=5, compute=40))
    issue = caught.value.issues[0]
    assert issue.path == "models[0].sla.p99_latency_ms" and "no queueing budget" in issue.message


def test_tight_sla_moves_to_a_faster_gpu_instead_of_failing():
    # 5 ms measured on an A10G (5.2 ms on an L4) leaves no budget in a 5 ms p99; 1.7 ms on an L40S does
    plan = compile_text(CLASSIC.format(framework="onnx", p99=5, compute=5))
    server = plan.triton_servers[0]
    assert server.instance_type.split(".")[0] not in ("g5", "g6")
    assert any("no queueing budget" in a.reason for a in server.decision.rejected)


def test_python_backend_warns_about_cancellation_and_missing_profile():
    plan = compile_text(CLASSIC.format(framework="python", p99=50, compute=5))
    messages = " ".join(w.message for w in plan.warnings)
    assert "request.is_cancelled()" in messages
    assert "rps_per_instance" in messages  # assumed, and said so


def test_small_models_share_one_gpu():
    text = "models:\n" + "".join(
        CLASSIC.format(framework="onnx", p99=50, compute=5).split("models:\n", 1)[1].replace("scorer", f"scorer-{i}")
        for i in range(6))
    plan = compile_text(text)
    assert len(plan.triton_servers) == 1
    assert len(plan.triton_servers[0].models) == 6
    assert plan.triton_servers[0].cache_size_bytes > 0
