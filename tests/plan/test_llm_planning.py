"""Planning an LLM by its whole SLA: the figures a plan states, checked by hand where a calculator can redo them.

The performance model itself is checked in test_performance.py; here the compiler's use of it: which bound a
planned figure sits against, what binds a model's size, MoE and MLA in memory and speed, LoRA buffers, and
the request shapes and loads the SLA language accepts.
"""

from __future__ import annotations

import math
import textwrap

import pytest

from modelfleet.plan.llm.speed.peak import SIMULATION_SOURCE
from modelfleet.plan.compiler import compile_fleet, models_in
from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.project import Project
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.load import parse_fleet_text
from modelfleet.spec.units import GIB
from tests.conftest import ROOT

PROD = EnvironmentSpec(name="prod", region="us-east-1")
MODEL = textwrap.dedent("""\
    models:
      - name: chat
        type: llm
        artifact: {artifact}
        size: {{dtype: {dtype}}}
        architecture: {arch}
        sla: {{{sla}}}
    {extra}""")


def plan_of(arch: str, sla: str, *, dtype: str = "bf16", artifact: str = "acme/chat", extra: str = "",
            env: EnvironmentSpec = PROD, read_config=None):
    text = MODEL.format(artifact=artifact, dtype=dtype, arch=arch, sla=sla, extra=textwrap.indent(extra, "    "))
    fleet = parse_fleet_text(text, read_config=read_config)
    return compile_fleet(fleet, env, load_instance_catalogue())


def test_decode_of_one_8b_stream_on_an_h100_is_bound_by_its_weights():
    """Llama 3.1 8B, bf16, one sequence on one H100 (p5.4xlarge, pinned). A decode step reads every weight but
    the input embedding table: (8.03e9 - 128,256 x 4,096) x 2 bytes = 15.01 GB, and the KV cache of its context
    (2,000 prompt + on average 150 generated tokens) x 128 KiB = 0.28 GB: 15.29 GB at 3,350 GB/s = 4.57 ms.
    That is the floor; vLLM reaches 70-90% of the bandwidth, so the plan's TPOT sits just above it."""
    plan = plan_of("llama-3.1-8b", "max_context_tokens: 4096, avg_input_tokens: 2000, avg_output_tokens: 300, "
                   "peak_concurrent_sequences: 1, p99_ttft_ms: 1000, p99_tpot_ms: 50, availability: 99.0",
                   extra="overrides: {instance_type: p5.4xlarge}")
    chat = plan.model("chat")
    hand_ms = ((8.03e9 - 128_256 * 4096) * 2 + 2150 * 131_072) / 3350e9 * 1e3
    assert hand_ms == pytest.approx(4.57, abs=0.01)
    assert chat.estimates.sequences_per_replica == 1 and chat.replicas == 1
    assert hand_ms < chat.estimates.tpot_ms < hand_ms / 0.65
    assert chat.estimates.source.startswith(f"{SIMULATION_SOURCE}, step times from AIConfigurator 0.12.0 h100_sxm")


def test_a_long_8b_prefill_on_an_h100_is_bound_by_compute():
    """One 8,192-token prompt: the GEMMs do 2 x 6.98e9 (weights but the embedding and output tables) x 8,192 =
    114.3 TFLOP, causal attention 32 layers x 2 x 32 heads x 256 x 8,192 x 4,096 (half of 8,192 keys on average)
    = 17.6 TFLOP: 131.9 TFLOP at the H100's 989 TFLOPS = 133.4 ms at best. Reading the 16 GB of weights would
    take 4.8 ms: compute binds, and vLLM reaches 50-80% of the peak there."""
    plan = plan_of("llama-3.1-8b", "max_context_tokens: 8448, avg_input_tokens: 8192, avg_output_tokens: 256, "
                   "peak_concurrent_sequences: 1, p99_ttft_ms: 2000, availability: 99.0",
                   extra="overrides: {instance_type: p5.4xlarge}")
    compute_ms = (2 * (8.03e9 - 2 * 128_256 * 4096) * 8192 + 32 * 2 * 32 * 256 * 8192 * 4096) / 989e12 * 1e3
    assert compute_ms == pytest.approx(133.4, abs=0.1)
    prefill = plan.model("chat").estimates.prefill_ms
    assert compute_ms < prefill < compute_ms / 0.5


MIXTRAL_DENSE = "{layers: 32, attention_heads: 32, kv_heads: 8, head_dim: 128, hidden_size: 4096, " \
                "intermediate_size: 114688, vocab_size: 32000}"


def test_a_moe_holds_every_expert_but_computes_and_reads_its_active_ones():
    """Mixtral 8x7B against a dense model of the same 46.7B parameters (its 8 expert MLPs as one 8 x 14,336
    wide MLP): the same 87 GiB of bf16 weights, so the same GPUs; but a token runs 2 of the 8 experts (12.9B
    active parameters, 28%). On two H100s a lone dense stream reads (46.7e9 - the 32,000 x 4,096 input embeddings) x 2 bytes / 2 = 46.6 GB
    per GPU a token (16.2 ms at the fitted 86% of 3,350 GB/s); the MoE reads its attention (1.3 GB) and the experts its token picks (1.6 distinct
    on average: routers favour some) at the fused-MoE kernel's lower fitted efficiency, with its fixed per-layer
    cost: well under half the dense time, not the 28% the parameters alone suggest. A 2,000-token prefill does
    28% of the dense expert FLOPs beside the same attention and dispatch: about half the time."""
    sla = ("max_context_tokens: 8192, avg_input_tokens: 2000, avg_output_tokens: 300, peak_concurrent_sequences: 1, "
           "p99_ttft_ms: 5000, availability: 99.0")
    pin = "overrides: {instance_type: p5.48xlarge, tensor_parallel_size: 2, expert_parallel: false}"
    moe = plan_of("mixtral-8x7b", sla, extra=pin).model("chat")
    dense = _dense_plan(sla, pin)
    assert moe.weights_gib == pytest.approx(46.7e9 * 2 / GIB, abs=0.01)
    assert dense.weights_gib == moe.weights_gib  # the declared params: memory is the same
    dense_read_ms = (46.7e9 - 32000 * 4096) * 2 / 2 / (3350e9 * 0.856) * 1e3
    assert dense_read_ms == pytest.approx(16.2, abs=0.1) and dense_read_ms < dense.estimates.tpot_ms
    assert 0.28 < moe.estimates.tpot_ms / dense.estimates.tpot_ms < 0.45
    assert 0.4 < moe.estimates.prefill_ms / dense.estimates.prefill_ms < 0.6
    why = next(d for d in moe.decisions if d.choice.startswith("MoE architecture"))
    assert "46.7B parameters" in why.reason and "12.9B active parameters" in why.reason


def _dense_plan(sla: str, pin: str):
    text = MODEL.format(artifact="acme/dense", dtype="bf16", arch=MIXTRAL_DENSE, sla=sla,
                        extra=textwrap.indent(pin.replace(", expert_parallel: false", ""), "    "))
    text = text.replace("size: {dtype: bf16}", "size: {params: 46.7B, dtype: bf16}")
    return compile_fleet(parse_fleet_text(text), PROD, load_instance_catalogue()).model("chat")


def test_deepseek_v3_from_its_config_json_plans_with_active_parameters_and_mla_cache():
    """examples/deepseek-v3: the model's own config.json. 671B FP8 weights = 624.9 GiB: more than one p5.48xlarge
    holds (8 x (79.6 x 0.9 - 1.5) = 561 GiB), so two nodes (pp=2). A GPU of the first stage keeps 31 of the 61
    layers' latent cache: 576 elements x 2 bytes x 31 = 35,712 bytes a token, whole on each of the 8 ranks.
    Left for it per GPU: 79.6 x 0.9 - 1.5 - 624.9 / 16 = 31.08 GiB; a sequence of 8,000 + 1,000 tokens takes
    9,000 x 35,712 B = 321.4 MB, so the KV cache holds 103 sequences."""
    project = Project(root=str(ROOT / "examples" / "deepseek-v3"))
    plan = project.plan("prod")
    ds = plan.model("deepseek-v3")
    assert (ds.instance_type, ds.tensor_parallel_size, ds.pipeline_parallel_size) == ("p5.48xlarge", 8, 2)
    assert ds.weights_gib == pytest.approx(671.03e9 / GIB, abs=0.5)
    free_gib = 79.6 * 0.9 - 1.5 - ds.weights_gib / 16
    per_sequence = 9000 * 576 * 2 * 31
    assert per_sequence == 321_408_000
    assert int(free_gib * GIB // per_sequence) == 103
    assert "the KV cache holds 103 sequences of 9,000 tokens" in ds.decisions[0].reason
    why = next(d for d in ds.decisions if "architecture (models/deepseek-v3/config.json)" in d.choice)
    assert why.choice.startswith("MoE + MLA architecture")
    assert "8 of 256 routed experts and a shared expert: 37.6B active parameters" in why.reason
    assert "kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements (68.6 KiB per token)" in why.reason
    assert ds.estimates.ttft_p99_ms <= 15000 and ds.estimates.tpot_ms <= 100


def test_a_config_json_and_the_preset_of_the_same_model_plan_alike():
    config = (ROOT / "examples" / "deepseek-v3" / "models" / "deepseek-v3" / "config.json").read_text()
    sla = ("max_context_tokens: 16384, avg_input_tokens: 4000, avg_output_tokens: 500, peak_concurrent_sequences: 8, "
           "p99_ttft_ms: 10000, p99_tpot_ms: 100")
    from_file = plan_of("{config: ds/config.json}", sla, dtype="fp8", artifact="deepseek-ai/DeepSeek-V3",
                        extra="quantization: fp8", read_config={"ds/config.json": config}.__getitem__)
    preset = plan_of("deepseek-v3", sla, dtype="fp8", artifact="deepseek-ai/DeepSeek-V3", extra="quantization: fp8")
    a, b = from_file.model("chat"), preset.model("chat")
    assert (a.instance_type, a.replicas, a.max_num_seqs, a.estimates.tpot_ms) == (
        b.instance_type, b.replicas, b.max_num_seqs, b.estimates.tpot_ms)


def test_lora_buffers_are_counted_per_gpu():
    """Two rank-16 adapters on Llama 3.1 8B at tp=1: per layer and rank, the adapted projections take inputs +
    outputs of q (4,096 + 4,096), k and v (2 x (4,096 + 1,024)), o (4,096 + 4,096), gate and up
    (2 x (4,096 + 14,336)), down (14,336 + 4,096) = 81,920 numbers; x 16 ranks x 2 adapters x 32 layers x 2 bytes
    = 167,772,160 B = 0.156 GiB on the GPU."""
    extra = ("lora:\n  adapters:\n    - {name: a, artifact: acme/a}\n    - {name: b, artifact: acme/b}\n"
             "overrides: {instance_type: g6e.xlarge}")
    sla = "max_context_tokens: 8192, peak_concurrent_sequences: 4, p99_ttft_ms: 5000"
    with_lora = plan_of("llama-3.1-8b", sla, extra=extra).model("chat")
    without = plan_of("llama-3.1-8b", sla, extra="overrides: {instance_type: g6e.xlarge}").model("chat")
    assert with_lora.lora_gib == pytest.approx(167_772_160 / GIB, abs=0.001)
    assert without.kv_cache_gib - with_lora.kv_cache_gib == pytest.approx(167_772_160 / GIB, abs=0.002)
    args = with_lora.args
    assert args[args.index("--max-lora-rank") + 1] == "16" and args[args.index("--max-loras") + 1] == "2"
    assert args[args.index("--lora-modules") + 1:args.index("--lora-modules") + 3] == ("a=acme/a", "b=acme/b")
    assert "--enable-lora" in args and with_lora.lora_adapters == ("a", "b")


def test_extra_args_and_the_models_own_image():
    extra = "image: vllm/vllm-openai:v0.11.0\noverrides: {extra_args: [--seed, '7']}"
    chat = plan_of("llama-3.1-8b", "max_context_tokens: 8192, peak_concurrent_sequences: 4, p99_ttft_ms: 5000",
                   extra=extra).model("chat")
    assert chat.image == "vllm/vllm-openai:v0.11.0" and chat.args[-2:] == ("--seed", "7")


@pytest.mark.parametrize(("load", "rate"), [("peak_requests_per_s: 4", 4.0), ("peak_output_tokens_per_s: 1200", 4.0)])
def test_a_rate_load_is_carried_by_enough_replicas(load, rate):
    """4 requests/s of 300 output tokens each (or 1,200 tokens/s): the replicas together generate 1,200
    tokens/s, and each carries what its p99 TTFT and TPOT allow."""
    plan = plan_of("llama-3.1-8b", f"max_context_tokens: 8192, avg_input_tokens: 2000, avg_output_tokens: 300, "
                   f"{load}, p99_ttft_ms: 1500, p99_tpot_ms: 50")
    chat = plan.model("chat")
    assert chat.replicas * chat.estimates.output_tokens_per_s_per_replica == pytest.approx(rate * 300, rel=1e-3)
    assert chat.estimates.ttft_p99_ms <= 1500 and chat.estimates.tpot_ms <= 50


def test_max_num_seqs_is_bounded_by_tpot_and_says_so():
    loose = plan_of("llama-3.1-8b", "max_context_tokens: 8192, avg_input_tokens: 1000, avg_output_tokens: 500, "
                    "peak_concurrent_sequences: 64, p99_ttft_ms: 3000", extra="overrides: {instance_type: g6e.xlarge}")
    tight = plan_of("llama-3.1-8b", "max_context_tokens: 8192, avg_input_tokens: 1000, avg_output_tokens: 500, "
                    "peak_concurrent_sequences: 64, p99_ttft_ms: 3000, p99_tpot_ms: 30",
                    extra="overrides: {instance_type: g6e.xlarge}")
    a, b = loose.model("chat"), tight.model("chat")
    assert b.max_num_seqs < a.max_num_seqs and b.estimates.tpot_at_max_num_seqs_ms <= 30
    assert b.binding_constraint in ("tpot", "ttft") and b.replicas > a.replicas  # fewer slots: more replicas
    assert any("no sla.p99_tpot_ms" in w.message for w in loose.warnings)
    assert "the most sequences whose TPOT stays within the p99" in b.decisions[0].reason


def test_an_impossible_tpot_names_the_bound_and_the_fix():
    from modelfleet.errors import CompileError

    with pytest.raises(CompileError) as caught:
        plan_of("llama-3.1-405b", "max_context_tokens: 8192, avg_input_tokens: 1000, avg_output_tokens: 500, "
                "peak_concurrent_sequences: 4, p99_ttft_ms: 10000, p99_tpot_ms: 5")
    issue = caught.value.issues[0]
    assert "time per output token binds" in issue.message and "raise sla.p99_tpot_ms to at least" in issue.fix


def test_every_example_llm_shows_estimates_and_meets_its_slas(project, plans):
    for stack in ("prod", "staging"):
        specs = {m.name: m for _, m in models_in(project.fleet(), stack)}
        for model in (m for m in plans[stack].models if m.type == "llm"):
            spec, e = specs[model.name], model.estimates
            assert e is not None and e.source, model.name
            assert e.ttft_p99_ms <= spec.sla.p99_ttft_ms and e.tpot_ms <= spec.sla.p99_tpot_ms, (stack, model.name)
            assert e.tpot_at_max_num_seqs_ms <= spec.sla.p99_tpot_ms, (stack, model.name)
            assert model.binding_constraint in ("availability", "ttft", "tpot", "memory"), model.binding_constraint


def test_the_prod_70b_is_not_planned_on_l40s_any_more(plans):
    """NVIDIA's measured data: a 70B's 8k prefill on 4 x L40S (PCIe) takes about 10 s; the old estimate, 40%
    of FP16 peak, said 2 s and planned the prod 70B there. Its 3,000-token prompts now rule L40S out."""
    mid = plans["prod"].model("llama-3-3-70b-instruct")
    assert not mid.instance_type.startswith("g6e")
    rejected = {a.option.split()[0]: a.reason for a in mid.decisions[0].rejected}
    assert "g6e.12xlarge" in rejected and "to its first token" in rejected["g6e.12xlarge"]


def test_a_prompt_length_left_to_its_default_is_a_warning():
    """The default prompt fills the context (the worst case): a plan sized for it says so."""
    defaulted = plan_of("llama-3.1-8b", "max_context_tokens: 8192, peak_concurrent_sequences: 8, p99_ttft_ms: 3000, "
                        "p99_tpot_ms: 50")
    declared = plan_of("llama-3.1-8b", "max_context_tokens: 8192, avg_input_tokens: 1000, peak_concurrent_sequences: 8, "
                       "p99_ttft_ms: 3000, p99_tpot_ms: 50")
    assert defaulted.model("chat").estimates.input_tokens == 8192 - 256
    assert any("no sla.avg_input_tokens: planned for prompts of 7,936 tokens" in w.message for w in defaulted.warnings)
    assert not any("avg_input_tokens" in w.message for w in declared.warnings)


def test_the_estimates_and_the_explanation_quote_the_same_figures(plans):
    """The figures are rounded once, as the plan keeps them: a TTFT of 1,636.54 ms was 1,637 in the reason and
    1,636 on the estimates line (1,636.5 rounds to even)."""
    from modelfleet.commands.plan import format_plan

    deepseek = Project(root=str(ROOT / "examples" / "deepseek-v3")).plan("prod")
    for plan in (plans["prod"], plans["staging"], deepseek):
        text = format_plan(plan)
        for model in (m for m in plan.models if m.type == "llm"):
            e = model.estimates
            ttft, tpot = f"p99 TTFT {e.ttft_p99_ms:,.0f} ms", f"p99 TPOT {e.tpot_p99_ms:.1f} ms"
            assert ttft in model.decisions[0].reason and tpot in model.decisions[0].reason, model.name
            assert ttft in text and tpot in text, model.name


def test_the_canary_gates_tpot_on_the_sla_or_on_the_planned_slowest_stream(plans):
    """The canary analysis's TPOT bound was 1000 / profile.output_tokens_per_s_per_sequence (33.3 ms by
    default), a figure the planner no longer uses: now the SLA's p99_tpot_ms, or without one the TPOT the plan
    predicts with max_num_seqs running."""
    assert plans["prod"].model("llama-3-1-8b-instruct").tpot_ms == 50.0  # sla.p99_tpot_ms
    loose = plan_of("llama-3.1-8b", "max_context_tokens: 8192, avg_input_tokens: 1000, peak_concurrent_sequences: 8, "
                    "p99_ttft_ms: 3000").model("chat")
    assert loose.p99_tpot_ms is None and loose.tpot_ms == pytest.approx(loose.estimates.tpot_at_max_num_seqs_ms)
