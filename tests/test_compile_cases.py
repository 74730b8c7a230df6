"""Compiler behaviour on small catalogues: overrides, warnings and infeasible input."""

from __future__ import annotations

import json
import math
import textwrap

import pytest

from modelfleet.errors import CompileError, SpecError
from modelfleet.plan.compiler import compile_fleet
from modelfleet.render.fleet import render_fleet
from modelfleet.render.triton import parse_config
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.load import parse_fleet_text
from modelfleet.spec.units import GIB

LLM = textwrap.dedent("""\
    models:
      - name: chat
        type: llm
        serving: {serving}
        artifact: acme/chat
        size: {{dtype: {dtype}}}
        architecture: {arch}
        sla: {{max_context_tokens: 8192, peak_concurrent_sequences: 16, p99_ttft_ms: {ttft}}}
    """)
PROD = EnvironmentSpec(name="prod", region="us-east-1")
# A stack pinning vLLM 0.11, which spells online fp8 `fp8` and loads the 16-bit weights before quantizing.
OLD_VLLM = EnvironmentSpec.model_validate({"name": "prod", "region": "us-east-1",
                                           "vllm": {"image": "vllm/vllm-openai:v0.11.0"}})


def compile_text(text: str, env: EnvironmentSpec = PROD, catalogue=None):
    from modelfleet.plan.hardware.instances import load_instance_catalogue

    return compile_fleet(parse_fleet_text(text), env, catalogue or load_instance_catalogue())


def idle_prefill_ms(preset: str, instance: str, tp: int, pp: int, tokens: int = 8192 - 256) -> float:
    """The performance model's own figure for one prompt on an idle replica (default: the request shape
    the SLA defaults to, a prompt filling the context but for 256 output tokens)."""
    from modelfleet.plan.hardware.instances import load_instance_catalogue
    from modelfleet.plan.llm.speed.performance import Layout, prefill_ms, shape_from_fields
    from modelfleet.plan.llm.speed.calibration import gpu_for
    from modelfleet.spec.presets import LLM_PRESETS

    gpu = gpu_for(load_instance_catalogue().instances[instance].gpu)
    return prefill_ms(gpu, shape_from_fields(LLM_PRESETS[preset].fields), Layout(tp, pp), tokens)


def test_llm_on_triton_is_refused_with_the_reason_and_the_fix():
    """Triton's vLLM backend passed every check and failed in the cluster (no vLLM in the -py3 image, a queue
    metric it never reports); the refusal says why, and where."""
    for serving, reason in (("triton", "no waiting or running request gauge"), ("triton-trtllm", "trtllm-build")):
        with pytest.raises(SpecError) as caught:
            parse_fleet_text(LLM.format(serving=serving, dtype="bf16", arch="llama-3.1-8b", ttft=2000))
        (issue,) = caught.value.issues
        assert issue.path == "models[0].serving" and reason in issue.message, issue
        assert "use serving: vllm" in issue.fix


def test_405b_that_fits_nowhere_names_the_binding_constraint_and_the_closest_layouts():
    # g5.48xlarge holds 756 GiB over 6 nodes, but one prompt alone prefills too slowly: TTFT binds, not memory.
    env = EnvironmentSpec(name="dev", region="us-east-1", instance_families=("g4dn", "g5"))
    with pytest.raises(CompileError) as caught:
        compile_text(LLM.format(serving="vllm", dtype="bf16", arch="llama-3.1-405b", ttft=10000), env)
    issue = caught.value.issues[0]
    slowest = idle_prefill_ms("llama-3.1-405b", "g5.48xlarge", 8, 6)
    assert slowest > 10000
    assert issue.path == "models[0]"
    assert "time to first token binds" in issue.message
    assert f"g5.48xlarge tp=8 pp=6: {math.ceil(slowest):,} ms" in issue.message
    assert "GiB" not in issue.message  # memory is not the problem
    # families whose GPUs prefill fast enough (not g6e: L40S nodes reduce over PCIe)
    assert issue.fix.startswith("allow p4d or p4de or p5 or p5en (instanceFamilies)")
    assert f"raise sla.p99_ttft_ms to at least {math.ceil(slowest)}" in issue.fix
    assert "sla.avg_input_tokens" in issue.fix  # shorter prompts prefill faster


def test_405b_in_prod_with_a_tight_ttft_blames_ttft_not_memory():
    # p5.48xlarge holds the 405B over 2 nodes, but its 7,936-token prompt takes more than a second alone.
    fastest = idle_prefill_ms("llama-3.1-405b", "p5.48xlarge", 8, 2)
    assert 1000 < fastest < 2000
    with pytest.raises(CompileError) as caught:
        compile_text(LLM.format(serving="vllm", dtype="bf16", arch="llama-3.1-405b", ttft=1000))
    issue = caught.value.issues[0]
    assert issue.message.startswith("chat: time to first token binds")
    assert f"p5.48xlarge tp=8 pp=2: {math.ceil(fastest):,} ms" in issue.message and "756" not in issue.message
    assert issue.fix.startswith(f"raise sla.p99_ttft_ms to at least {math.ceil(fastest)}; or declare shorter prompts "
                                f"(sla.avg_input_tokens {int(7936 * 1000 / fastest)}")


def test_weights_too_big_for_every_layout_blame_memory_with_the_largest_layouts():
    # 405.85B bf16 = 756 GiB. Without g5.48xlarge, the largest g5 layout is 8 nodes of g5.12xlarge:
    # 756 / 32 GPUs = 23.6 GiB each, over 22.35 x 0.9 - 1.5 = 18.6 GiB: memory binds.
    env = EnvironmentSpec(name="dev", region="us-east-1", instance_families=("g5",))
    text = LLM.format(serving="vllm", dtype="bf16", arch="llama-3.1-405b", ttft=100000)
    with pytest.raises(CompileError) as caught:
        compile_text(text, env, _without(("g5.48xlarge",)))
    issue = caught.value.issues[0]
    assert "GPU memory binds: 756 GiB of bf16 weights" in issue.message
    assert "g5.12xlarge tp=4 pp=8: weights 23.6 GiB per GPU exceed the 18.6 GiB budget" in issue.message
    assert "quantization: awq_marlin" in issue.fix


def _without(names: tuple[str, ...]):
    from dataclasses import replace
    from types import MappingProxyType

    from modelfleet.plan.hardware.instances import load_instance_catalogue

    full = load_instance_catalogue()
    return replace(full, instances=MappingProxyType({k: v for k, v in full.instances.items() if k not in names}))


def test_tight_ttft_is_infeasible_with_reasons():
    with pytest.raises(CompileError) as caught:
        compile_text(LLM.format(serving="vllm", dtype="bf16", arch="llama-3.1-8b", ttft=10))
    assert "TTFT" in caught.value.issues[0].message


CUSTOM = textwrap.dedent("""\
    models:
      - name: chat
        type: llm
        artifact: acme/custom-llm
        size: {size}
        architecture: {{layers: 32, attention_heads: {heads}, kv_heads: {kv_heads}, head_dim: 128}}
        sla: {{max_context_tokens: 8192, peak_concurrent_sequences: 16, p99_ttft_ms: {ttft}}}
        overrides: {overrides}
    """)


def test_tensor_parallel_override_that_breaks_the_kv_head_rule_points_at_the_override():
    # 24 heads / 2 is fine, but 3 KV heads: 3 % 2 != 0 and 2 < 3, so vLLM refuses tp=2
    text = CUSTOM.format(size="{params: 7B, dtype: bf16}", heads=24, kv_heads=3, ttft=2500,
                         overrides="{tensor_parallel_size: 2}")
    with pytest.raises(CompileError) as caught:
        compile_text(text)
    issue = caught.value.issues[0]
    assert issue.path == "models[0].overrides.tensor_parallel_size"
    assert "3 KV heads" in issue.message and "fp8" not in issue.fix
    assert issue.fix == "use 1, or leave it to the compiler"  # of 1, 2, 4, 8 only 1 divides the 3 KV heads


def test_multi_node_layouts_only_when_no_single_node_holds_the_model():
    # Llama 3.1 70B, relaxed TTFT: four g6e.xlarge (1 x L40S) at pp=4 would cost 4 x 1.861 = 7.44 USD/h per
    # replica, less than one g6e.12xlarge (10.49), but one node holds the model, so no pipeline parallelism.
    env = EnvironmentSpec(name="prod", region="us-east-1", instance_families=("g6e",))
    plan = compile_text(LLM.format(serving="vllm", dtype="bf16", arch="llama-3.1-70b", ttft=60000), env)
    chat = plan.model("chat")
    assert (chat.instance_type, chat.pipeline_parallel_size) == ("g6e.12xlarge", 1)
    rejected = {a.option: a.reason for a in chat.decisions[0].rejected}
    assert rejected["g6e.xlarge tp=1 pp=1"].endswith(
        "pipeline parallelism across nodes is used only when no allowed single node serves the model, "
        "and g6e.12xlarge does")


def test_a_model_whose_heads_forbid_tensor_parallelism_stays_on_one_big_gpu():
    # 7 heads: only tp=1. 20B bf16 = 37.3 GiB fits one L40S (38.5 GiB budget) or H100, never eight L4s in a pipeline
    text = CUSTOM.format(size="{params: 20B, dtype: bf16}", heads=7, kv_heads=7, ttft=10000, overrides="{}")
    chat = compile_text(text).model("chat")
    assert (chat.tensor_parallel_size, chat.pipeline_parallel_size, chat.nodes_per_replica) == (1, 1, 1)


def test_candidates_are_priced_at_the_nodes_the_zone_spread_forces():
    # 16 sequences of the 8B at 99.9%: two replicas in two zones, so two nodes even where one 4-GPU node
    # would hold both pods: g6e.12xlarge costs at least 2 x (10.49264 + its 200 GiB gp3 root volume, 16 USD a
    # month: 0.022 an hour) = 21.03 USD/h at that floor, not 10.51
    from modelfleet.plan.hardware.instances import load_instance_catalogue
    from modelfleet.plan.hardware.node_price import HOURS_PER_MONTH
    volume = load_instance_catalogue().ebs_gp3["us-east-1"].monthly(PROD.deploy.node_disk_gib, 3000, 125) / HOURS_PER_MONTH
    plan = compile_text(LLM.format(serving="vllm", dtype="bf16", arch="llama-3.1-8b", ttft=2000))
    chat = plan.model("chat")
    rejected = {a.option: a for a in chat.decisions[0].rejected}
    big = rejected["g6e.12xlarge tp=1 pp=1"]
    floor = 2 * (10.49264 + volume)
    assert big.usd_per_hour == pytest.approx(floor, abs=1e-4) and f"{floor:.2f} USD/h at its replica floor" in big.reason
    assert f"on {plan.node_group(chat.node_group).desired_size} node(s)" in chat.decisions[0].reason


def test_memory_only_llm_still_gets_a_ttft_check():
    # 30 GiB of bf16 weights = 16.1e9 parameters: the speed is estimated for them, and the plan says so
    text = CUSTOM.format(size="{memory_gib: 30}", heads=32, kv_heads=8, ttft=5000, overrides="{}")
    plan = compile_text(text)
    assert any("16.1B parameters size.memory_gib holds" in w.message for w in plan.warnings)
    assert plan.model("chat").estimates.prefill_ms > 0
    # a tight SLA is refused, not skipped: even 8 H100s take longer than 5 ms for a 7,936-token prompt
    with pytest.raises(CompileError) as caught:
        compile_text(CUSTOM.format(size="{memory_gib: 30}", heads=32, kv_heads=8, ttft=5, overrides="{}"))
    assert "time to first token binds" in caught.value.issues[0].message


QUANTIZED = textwrap.dedent("""\
    models:
      - name: chat
        type: llm
        artifact: meta-llama/Llama-3.3-70B-Instruct
        size: {{dtype: {dtype}}}
        architecture: llama-3.3-70b
        {quantization}
        sla: {{max_context_tokens: 8192, avg_input_tokens: 1000, peak_concurrent_sequences: 32, p99_ttft_ms: 60000}}
        overrides: {{instance_type: g6e.12xlarge, tensor_parallel_size: 4}}
    """)


def _flag(args: tuple[str, ...], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args else None


def test_fp8_weights_are_quantized_by_vllm_on_fp8_gpus_only():
    # A 16-bit checkpoint quantized while loading; vLLM 0.11 (pinned here) spells it --quantization fp8
    # and holds the 16-bit weights while loading: 131.4 / 4 = 32.9 GiB per L40S, within 44.4 x 0.9 - 1.5.
    chat = compile_text(QUANTIZED.format(dtype="fp8", quantization=""), OLD_VLLM).model("chat")
    assert chat.weights_gib == pytest.approx(70.55e9 / GIB, abs=0.001) and chat.dtype == "fp8"
    assert (_flag(chat.args, "--quantization"), _flag(chat.args, "--dtype")) == ("fp8", "auto")
    assert chat.instance_type == "g6e.12xlarge"
    assert chat.checkpoint_gib == pytest.approx(2 * chat.weights_gib, abs=0.01)
    # the KV cache stays 16-bit: 2 x 80 layers x 2 KV heads per GPU x 128 x 2 B per token
    left = 44.4 * 0.9 - 1.5 - 70.55e9 / GIB / 4
    assert chat.kv_cache_tokens == int(left * GIB // (2 * 80 * 2 * 128 * 2))
    only_ampere = EnvironmentSpec(name="prod", region="us-east-1", instance_families=("g5", "p4d"),
                                  vllm={"image": "vllm/vllm-openai:v0.11.0"})
    unpinned = QUANTIZED.format(dtype="fp8", quantization="").replace(
        "    overrides: {instance_type: g6e.12xlarge, tensor_parallel_size: 4}\n", "")
    with pytest.raises(CompileError) as caught:
        compile_text(unpinned, only_ampere)
    assert "FP8 tensor cores" in caught.value.issues[0].message
    assert caught.value.issues[0].fix.startswith("allow g6 or g6e or p5 or p5en (instanceFamilies)")


def test_online_fp8_flag_follows_the_vllm_release_in_the_image():
    newer = EnvironmentSpec.model_validate({"name": "prod", "region": "us-east-1",
                                            "vllm": {"image": "vllm/vllm-openai:v0.32.0"}})
    chat = compile_text(QUANTIZED.format(dtype="fp8", quantization=""), newer).model("chat")
    assert _flag(chat.args, "--quantization") == "fp8_per_tensor"  # 0.32 refuses online `fp8`
    custom = EnvironmentSpec.model_validate({"name": "prod", "region": "us-east-1",
                                             "vllm": {"image": "123.dkr.ecr.us-east-1.amazonaws.com/vllm@sha256:ab"}})
    plan = compile_text(QUANTIZED.format(dtype="fp8", quantization=""), custom)
    assert any("cannot tell the vLLM release" in w.message for w in plan.warnings)


def test_pre_quantized_checkpoint_is_declared_and_passed_to_vllm():
    chat = compile_text(QUANTIZED.format(dtype="int4", quantization="quantization: awq_marlin")).model("chat")
    assert chat.weights_gib == pytest.approx(70.55e9 * 0.5 / GIB, abs=0.001)
    assert (_flag(chat.args, "--quantization"), _flag(chat.args, "--dtype")) == ("awq_marlin", "auto")
    assert _flag(chat.args, "--kv-cache-dtype") == "auto" and chat.quantization == "awq_marlin"
    # the KV cache is sized at 2 bytes (auto = the 16-bit activations), not at the weights' 0.5 bytes
    assert chat.instance_type == "g6e.12xlarge" and chat.tensor_parallel_size == 4
    left = 44.4 * 0.9 - 1.5 - 70.55e9 * 0.5 / GIB / 4
    assert chat.kv_cache_tokens == int(left * GIB // (2 * 80 * 2 * 128 * 2))


@pytest.mark.parametrize(("dtype", "quantization", "path", "text"), [
    ("int4", "", "models[0].size.dtype", "need a pre-quantized checkpoint"),
    ("bf16", "quantization: awq", "models[0].quantization", "holds int4 weights, not bf16"),
    ("fp8", "quantization: gptq", "models[0].quantization", "int4 or int8"),
])
def test_quantization_contradictions_are_located(dtype, quantization, path, text):
    from modelfleet.errors import SpecError

    with pytest.raises(SpecError) as caught:
        parse_fleet_text(QUANTIZED.format(dtype=dtype, quantization=quantization))
    issue = caught.value.issues[0]
    assert issue.path == path and text in issue.message and issue.line > 0


def test_kv_cache_fp8_override_halves_the_kv_cache():
    text = LLM.format(serving="vllm", dtype="bf16", arch="llama-3.1-8b", ttft=2000)
    auto = compile_text(text).model("chat")
    fp8 = compile_text(text + "    overrides: {kv_cache_dtype: fp8}\n").model("chat")
    assert fp8.instance_type == auto.instance_type
    assert fp8.kv_cache_tokens in (2 * auto.kv_cache_tokens, 2 * auto.kv_cache_tokens + 1)
    assert _flag(fp8.args, "--kv-cache-dtype") == "fp8" and "uncalibrated" in fp8.decisions[1].reason


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
    # REJECT drops queued requests; what still runs is a request already in execute() whose client gave up
    assert "REJECT drops requests still queued past the timeout" in messages and "timed-out requests still run" not in messages
    assert "rps_per_instance" in messages  # assumed, and said so


def test_small_models_share_one_gpu():
    text = "models:\n" + "".join(
        CLASSIC.format(framework="onnx", p99=50, compute=5).split("models:\n", 1)[1].replace("scorer", f"scorer-{i}")
        for i in range(6))
    plan = compile_text(text)
    assert len(plan.triton_servers) == 1
    assert len(plan.triton_servers[0].models) == 6
    assert plan.triton_servers[0].cache_size_bytes > 0


def _scorers(pools: list[str | None]) -> str:
    block = CLASSIC.format(framework="onnx", p99=50, compute=5).split("models:\n", 1)[1]
    return "models:\n" + "".join(block.replace("scorer", f"scorer-{i}") + (f"    pool: {pool}\n" if pool else "")
                                 for i, pool in enumerate(pools))


def test_servers_are_named_after_their_pool_and_pools_never_share_a_server():
    plan = compile_text(_scorers(["fraud", "fraud", None, None, "search"]))
    group = plan.triton_servers[0].instance_type.replace(".", "-")
    servers = {s.name: s.models for s in plan.triton_servers}
    assert servers == {"triton-fraud": ("scorer-0", "scorer-1"), f"triton-{group}": ("scorer-2", "scorer-3"),
                       "triton-search": ("scorer-4",)}
    # each server was named after its first member before: the former name keeps a deployed stack's resources
    assert {s.name: s.former_names for s in plan.triton_servers} == {
        "triton-fraud": ("triton-scorer-0",), f"triton-{group}": ("triton-scorer-2",),
        "triton-search": ("triton-scorer-4",)}


def test_a_pool_named_like_the_default_one_is_the_default_pool():
    plan = compile_text(_scorers([None, None]))
    group = plan.triton_servers[0].instance_type.replace(".", "-")
    again = compile_text(_scorers([group, None]))
    assert [(s.name, s.models) for s in again.triton_servers] == [(f"triton-{group}", ("scorer-0", "scorer-1"))]
    assert [(s.name, s.models) for s in plan.triton_servers] == [(f"triton-{group}", ("scorer-0", "scorer-1"))]


def test_a_model_with_a_gpu_of_its_own_names_its_server_after_the_pool_and_itself():
    text = _scorers(["fraud", "fraud"]).replace("size: {memory_gib: 0.2}", "size: {memory_gib: 0.2}\n    overrides: {dedicated_gpu: true}", 1)
    assert sorted(s.name for s in compile_text(text).triton_servers) == ["triton-fraud", "triton-fraud-scorer-0"]


OVERRIDDEN = textwrap.dedent("""\
    models:
      - name: scorer
        type: tabular
        framework: onnx
        artifact: s3://models-bucket/scorer
        size: {{memory_gib: 0.2}}
        inputs: [{{name: x, dtype: fp32, dims: [16]}}]
        outputs: [{{name: y, dtype: fp32, dims: [1]}}]
        sla: {{p99_latency_ms: 100, peak_rps: 100}}
        profile: {{compute_ms: 5, rps_per_instance: 2000}}
        overrides: {{{overrides}}}
    """)


def test_queue_overrides_that_break_the_sla_are_a_located_error():
    from modelfleet.spec.load import locate_issues
    from modelfleet.spec.yaml_source import parse_yaml

    text = OVERRIDDEN.format(overrides="queue_timeout_us: 5000000, max_queue_delay_us: 900000")
    with pytest.raises(CompileError) as caught:
        compile_text(text)
    issue = locate_issues(caught.value, parse_yaml(text, "models.yaml")).issues[0]
    assert (issue.path, issue.line) == ("models[0].overrides.queue_timeout_us", 11)
    # even on an H100 (2,000 req/s on an A10G x 3350/600 = 11,167 req/s, so a batch of 256 takes 22.925 ms)
    # the worst answered request queues up to the timeout (the window counts inside it), then waits for the
    # batch in progress and runs its own: 5000 + 2 x 22.925 ms, far past 100 ms
    assert ("queue timeout 5000 ms + the batch in progress 22.925 ms + its own batch 22.925 ms (batch of 256) "
            "= 5045.85 ms") in issue.message
    # room for the timeout: 100 ms - 2 x 22.925 ms = 54.15 ms; the 900 ms window must then shrink below it
    assert issue.fix == ("lower overrides.queue_timeout_us to at most 54100 and overrides.max_queue_delay_us below "
                         "it (at most 27000); or, if 5046 ms is the latency you accept, raise sla.p99_latency_ms "
                         "to it")


def test_queue_overrides_within_the_sla_are_kept_and_explained():
    plan = compile_text(OVERRIDDEN.format(overrides="queue_timeout_us: 50000"))
    scorer = plan.model("scorer")
    assert scorer.queue_timeout_us == 50000
    assert scorer.decisions[0].reason.startswith("p99 100 ms >= queue timeout 50 ms (the 5 ms batching window "
                                                 "counts inside it) + the batch in progress")


def test_a_window_override_alone_points_at_itself():
    with pytest.raises(CompileError) as caught:
        compile_text(OVERRIDDEN.format(overrides="max_queue_delay_us: 200000"))
    issue = caught.value.issues[0]
    assert issue.path == "models[0].overrides.max_queue_delay_us"
    assert "not shorter than the queue timeout" in issue.message and "Triton counts the window" in issue.message


def test_throughput_scales_by_the_slower_of_compute_and_memory_bandwidth(catalogue):
    from modelfleet.plan.triton.policy import size_classic, speed_ratio

    gpus = {i.gpu.key: i.gpu for i in catalogue.instances.values()}
    # L4 vs A10G: 121/125 TFLOPS but 300/600 GB/s -> half as fast; H100: min(989/125, 3350/600) = 5.58x
    assert speed_ratio(gpus["a10g"], gpus["l4"]) == pytest.approx(0.5)
    assert speed_ratio(gpus["a10g"], gpus["h100"]) == pytest.approx(3350 / 600)
    fraud = parse_fleet_text(OVERRIDDEN.format(overrides="")).models[0]
    fraud = fraud.model_copy(update={"profile": fraud.profile.model_copy(update={"rps_per_instance": 20000.0,
                                                                                  "compute_ms": 3.0})})
    on_h100 = size_classic(fraud, gpus["h100"], catalogue, 0.7)
    on_l4 = size_classic(fraud, gpus["l4"], catalogue, 0.7)
    assert on_h100.rps_per_instance == pytest.approx(20000 * 3350 / 600)  # 111,667 req/s, not 158,240
    assert on_l4.rps_per_instance == pytest.approx(10000) and on_l4.compute_ms >= 6.0


def test_a_single_replica_environment_says_how_much_of_a_classic_peak_it_serves():
    # dev takes the cheapest GPU, an L4: 2,000 req/s measured on an A10G (the default) is 1,000 there, planned
    # at 70%: 5,000 / 700 = 7.14 GPUs of compute; the one replica carries about 5,000 / 7.14 = 700 req/s
    text = OVERRIDDEN.format(overrides="").replace("peak_rps: 100", "peak_rps: 5000")
    dev = EnvironmentSpec(name="dev", region="us-east-1", replicas={"single_replica": True})
    plan = compile_text(text, dev)
    assert plan.model("scorer").instance_type == "g6.xlarge" and plan.model("scorer").gpu_share == 7.1429
    (warning,) = [w for w in plan.warnings if "single-replica" in w.message]
    assert "1 replica(s) of triton-g6-xlarge-scorer serve about 700 of the 5000 peak req/s" in warning.message
    assert "7.14 GPUs of compute" in warning.message
    # where replicas follow the load (prod, on an A10G: 5,000 / 1,400 = 3.57 -> 4), nothing to warn about
    prod = compile_text(text)
    assert prod.server(prod.model("scorer").server).replicas == 4
    assert not [w for w in prod.warnings if "single-replica" in w.message]
