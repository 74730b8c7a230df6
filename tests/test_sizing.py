"""Hand-checked sizing and placement numbers (the arithmetic is written out in each test)."""

from __future__ import annotations


import pytest

from modelfleet.plan.llm.shape import kv_bytes_per_sequence
from modelfleet.plan.llm.speed.performance import shape_from_fields
from modelfleet.plan.sizing import availability_floor, nodes_for_pods, tensor_parallel_ok, weights_gib
from modelfleet.spec.architecture import resolve
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.models import ArchitectureSpec
from modelfleet.spec.presets import LLM_PRESETS
from modelfleet.spec.units import GIB, parse_param_count


def shape(name: str):
    return shape_from_fields(LLM_PRESETS[name].fields)


def test_weights_of_a_70b_bf16_model():
    # 70.6e9 parameters x 2 bytes = 141.2e9 bytes = 131.5 GiB
    assert weights_gib(70_600_000_000, "bf16") == pytest.approx(141.2e9 / 2**30)
    assert weights_gib(70_600_000_000, "bf16") == pytest.approx(131.5, abs=0.05)
    assert weights_gib(8_000_000_000, "fp8") == pytest.approx(7.45, abs=0.01)
    assert weights_gib(8_000_000_000, "int4") == pytest.approx(3.73, abs=0.01)


def test_kv_cache_per_token_llama_8b_70b_405b():
    # 2 (K, V) x 32 layers x 8 kv heads x 128 dims x 2 bytes = 131,072 B = 128 KiB
    assert kv_bytes_per_sequence(shape("llama-3.1-8b"), 1, tp=1, pp=1) == 131_072
    # 2 x 80 x 8 x 128 x 2 = 327,680 B; with tp=4 each GPU keeps 2 of the 8 kv heads: 81,920 B
    assert kv_bytes_per_sequence(shape("llama-3.3-70b"), 1, tp=1, pp=1) == 327_680
    assert kv_bytes_per_sequence(shape("llama-3.3-70b"), 1, tp=4, pp=1) == 81_920
    # tp=8 = kv heads: one head per GPU; pp=2 splits 126 layers into stages of 63
    assert kv_bytes_per_sequence(shape("llama-3.1-405b"), 1, tp=8, pp=2) == 2 * 63 * 1 * 128 * 2
    # more ranks than kv heads: vLLM replicates, one head per GPU (qwen2.5-7b has 4 kv heads) at tp=8
    assert kv_bytes_per_sequence(shape("qwen2.5-7b"), 1, tp=8, pp=1) == 2 * 28 * 1 * 128 * 2


def test_mla_kv_cache_is_the_latent_vector_on_every_gpu():
    """DeepSeek-V3's MLA keeps one latent of kv_lora_rank 512 + qk_rope_head_dim 64 = 576 elements per token and
    layer: 576 x 61 layers x 2 bytes (bf16) = 70,272 B per token (68.6 KiB), the same on every tensor-parallel
    rank (the latent is not split by head). K and V of its 128 heads (qk 192, v 128 dims) would be
    128 x (192 + 128) x 61 x 2 = 4,997,120 B: 71 times more."""
    deepseek = shape("deepseek-v3")
    assert kv_bytes_per_sequence(deepseek, 1, tp=1, pp=1) == 576 * 61 * 2 == 70_272
    assert kv_bytes_per_sequence(deepseek, 1, tp=8, pp=1) == 70_272
    # two pipeline stages: ceil(61 / 2) = 31 layers on a GPU of the first stage
    assert kv_bytes_per_sequence(deepseek, 1, tp=8, pp=2) == pytest.approx(70_272 * 31 / 61)
    # a 32k context on one GPU: 32,768 x 70,272 B = 2.14 GiB
    assert kv_bytes_per_sequence(deepseek, 32_768, tp=8, pp=1) / GIB == pytest.approx(2.145, abs=0.001)


def test_sliding_window_layers_keep_only_their_window():
    # gemma-2-9b: 42 layers, every other one attends to 4,096 tokens; 8 kv heads x 256 dims x 2 (K, V) x 2 B
    # = 8,192 B per token and layer. An 8,192-token sequence: 21 x 8,192 + 21 x 4,096 tokens of it.
    gemma = shape("gemma-2-9b")
    per_token_layer = 2 * 8 * 256 * 2
    assert kv_bytes_per_sequence(gemma, 8192, tp=1, pp=1) == (21 * 8192 + 21 * 4096) * per_token_layer
    assert kv_bytes_per_sequence(gemma, 1000, tp=1, pp=1) == 42 * 1000 * per_token_layer  # within the window


def test_tensor_parallel_rule_follows_vllm():
    qwen7b = resolve("qwen2.5-7b")  # 28 heads, 4 kv heads
    assert tensor_parallel_ok(qwen7b, 2) and tensor_parallel_ok(qwen7b, 4)
    assert not tensor_parallel_ok(qwen7b, 8)  # 28 % 8 != 0
    odd = ArchitectureSpec(layers=4, attention_heads=24, kv_heads=3, head_dim=64)
    assert not tensor_parallel_ok(odd, 2)  # 3 kv heads, 2 % 3 != 0 and 3 % 2 != 0


def test_units_and_floors():
    assert parse_param_count("8B") == 8_000_000_000
    assert parse_param_count("350M") == 350_000_000
    assert parse_param_count("1.5T") == 1_500_000_000_000
    with pytest.raises(ValueError):
        parse_param_count("8 bn")
    assert availability_floor(99.0, 99.9, 99.99) == 1
    assert availability_floor(99.9, 99.9, 99.99) == 2
    assert availability_floor(99.995, 99.9, 99.99) == 3
    assert nodes_for_pods({4: 3}, 8) == 2
    assert nodes_for_pods({1: 9}, 4) == 3
    assert nodes_for_pods({4: 1, 2: 3, 1: 2}, 8) == 2  # 4 + 2 + 2 | 2 + 1 + 1: no gaps when sizes divide
    assert nodes_for_pods({3: 3}, 4) == 3  # a size that does not divide the node: first-fit decreasing
    assert nodes_for_pods({1: 13_000_000}, 1) == 13_000_000  # a huge load is counted, never listed


def test_example_8b_70b_405b_land_on_gpu_node_and_nodes(plans):
    prod = plans["prod"]
    small, mid, big = (prod.model(n) for n in ("llama-3-1-8b-instruct", "llama-3-3-70b-instruct",
                                                "llama-3-1-405b-instruct"))
    assert (small.tensor_parallel_size, small.pipeline_parallel_size, small.gpus_per_replica) == (1, 1, 1)
    assert mid.pipeline_parallel_size == 1 and mid.tensor_parallel_size > 1
    assert mid.gpus_per_replica <= prod.node_group(mid.node_group).gpus_per_node
    assert big.pipeline_parallel_size > 1 and big.nodes_per_replica == big.pipeline_parallel_size
    assert big.tensor_parallel_size == prod.node_group(big.node_group).gpus_per_node
    for model in (small, mid, big):
        assert model.decisions[0].reason.startswith("binding: ")  # the constraint that set its size first
        assert model.decisions[0].rejected, "the plan lists the alternatives it rejected"


def test_70b_hand_checked_layout(plans):
    # 70.6B bf16 = 131.5 GiB over p4d.24xlarge's 8 x A100 40 GB, 39.4 GiB usable each.
    # budget per GPU = 39.4 x 0.90 - 1.5 = 33.96 GiB; weights 131.5 / 8 = 16.44 GiB; left for KV 17.52 GiB.
    # a token per GPU (8 kv heads over 8 GPUs: one each): 2 x 80 x 1 x 128 x 2 = 40,960 B; a sequence of
    # 3,000 + 500 tokens is 143.4 MB, so the KV cache holds floor(17.52 GiB / 143.4 MB) = 131 of them.
    mid = plans["prod"].model("llama-3-3-70b-instruct")
    assert mid.instance_type == "p4d.24xlarge" and mid.tensor_parallel_size == 8
    per_gpu_left = 39.4 * 0.90 - 1.5 - 70_600_000_000 * 2 / GIB / 8
    sequences = int(per_gpu_left * GIB // (3500 * 40_960))
    assert sequences == 131
    assert str(sequences) in mid.decisions[0].reason
    assert mid.kv_cache_tokens == int(per_gpu_left * GIB / (3500 * 40_960) * 3500)
    assert mid.min_replicas == 2  # 99.9% availability: two zones
    # 1.5 requests/s at peak, bursty (cv 2), over the replicas: the simulated p99 TTFT (queueing included) and
    # p99 TPOT, at their 95% upper bounds, within the SLA; in flight per replica no more than max_num_seqs
    e = mid.estimates
    assert e.traffic.arrivals == "bursty" and e.traffic.requests_per_s_per_replica == pytest.approx(1.5 / mid.replicas,
                                                                                                    abs=1e-4)
    assert e.ttft_p99_ms <= e.ttft_p99_bound_ms <= 2500 and e.tpot_p99_ms <= e.tpot_p99_bound_ms <= 60
    assert 1 <= e.sequences_per_replica <= mid.max_num_seqs


def test_405b_needs_pipeline_parallel_on_p5(plans):
    # 405.85B bf16 = 756 GiB > one p5.48xlarge (8 x (79.6 x 0.9 - 1.5) = 561 GiB) -> pp=2 (16 GPUs)
    big = plans["prod"].model("llama-3-1-405b-instruct")
    assert big.weights_gib == pytest.approx(405_850_000_000 * 2 / GIB, abs=0.01)
    assert (big.instance_type, big.tensor_parallel_size, big.pipeline_parallel_size) == ("p5.48xlarge", 8, 2)
    assert "--distributed-executor-backend" in big.args and "ray" in big.args
    rejected = {a.option.split()[0]: a.reason for a in big.decisions[0].rejected}
    # 6 A100 nodes a replica, one after another for every token: too slow for the p99 TPOT of 80 ms at any count
    assert "one stream alone decodes at" in rejected["p4d.24xlarge"] and "p99 TPOT of 80 ms" in rejected["p4d.24xlarge"]


def test_dev_single_replica_policy(plans):
    dev = plans["dev"]
    assert all(m.replicas == 1 for m in dev.models)
    assert "llama-3-1-405b-instruct" not in {m.name for m in dev.models}  # disabled in dev
    assert all(g.capacity_type == "spot" for g in dev.node_groups)


def test_env_defaults_are_documented_values():
    env = EnvironmentSpec(name="x", region="us-east-1")
    assert env.vllm.gpu_memory_utilization == 0.90
    assert env.capacity_type == "on-demand"


def test_the_replica_floor_is_decided_in_one_place():
    """Every workload's floor (LLMs, Triton GPU and CPU servers, rollouts) is sizing.replica_floor: no module
    but sizing.py applies the availability thresholds itself (issue 29 found four copies)."""
    import ast
    from pathlib import Path

    from modelfleet.plan.sizing import replica_floor
    from modelfleet.spec.environment import EnvironmentSpec

    package = Path(__file__).resolve().parent.parent / "modelfleet"
    callers = sorted(p.relative_to(package).as_posix() for p in package.rglob("*.py")
                     if any(isinstance(n, ast.Name) and n.id == "availability_floor" or
                            isinstance(n, ast.Attribute) and n.attr in ("ha_availability", "ha3_availability")
                            for n in ast.walk(ast.parse(p.read_text()))))
    assert callers == ["plan/sizing.py"], callers
    env = EnvironmentSpec(name="prod", region="us-east-1")
    single = EnvironmentSpec.model_validate({"name": "dev", "region": "us-east-1", "replicas": {"singleReplica": True}})
    assert [replica_floor(env, a) for a in (99.0, 99.9, 99.995)] == [1, 2, 3]
    assert replica_floor(single, 99.995) == 1
