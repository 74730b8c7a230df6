"""Hand-checked sizing and placement numbers (the arithmetic is written out in each test)."""

from __future__ import annotations

import math

import pytest

from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.presets import LLM_PRESETS
from modelfleet.plan.sizing import (
    availability_floor,
    kv_bytes_per_token,
    kv_bytes_per_token_per_gpu,
    nodes_for_pods,
    prefill_ms,
    tensor_parallel_ok,
    weights_gib,
)
from modelfleet.spec.models import ArchitectureSpec
from modelfleet.spec.units import GIB, parse_param_count


def arch(name: str) -> ArchitectureSpec:
    p = LLM_PRESETS[name]
    return ArchitectureSpec(layers=p.layers, attention_heads=p.attention_heads, kv_heads=p.kv_heads,
                            head_dim=p.head_dim)


def test_weights_of_a_70b_bf16_model():
    # 70.6e9 parameters x 2 bytes = 141.2e9 bytes = 131.5 GiB
    assert weights_gib(70_600_000_000, "bf16") == pytest.approx(141.2e9 / 2**30)
    assert weights_gib(70_600_000_000, "bf16") == pytest.approx(131.5, abs=0.05)
    assert weights_gib(8_000_000_000, "fp8") == pytest.approx(7.45, abs=0.01)
    assert weights_gib(8_000_000_000, "int4") == pytest.approx(3.73, abs=0.01)


def test_kv_cache_per_token_llama_8b_and_70b():
    # 2 x 32 layers x 8 kv heads x 128 dims x 2 bytes = 131,072 B = 128 KiB
    assert kv_bytes_per_token(arch("llama-3.1-8b"), 2) == 131_072
    # 2 x 80 x 8 x 128 x 2 = 327,680 B = 320 KiB; with tp=4 each GPU keeps 2 kv heads: 80 KiB
    assert kv_bytes_per_token(arch("llama-3.3-70b"), 2) == 327_680
    assert kv_bytes_per_token_per_gpu(arch("llama-3.3-70b"), 2, tp=4, pp=1) == 81_920
    # tp=8 > kv heads 8? equal: one head per GPU. 405B, pp=2: 63 layers per stage
    assert kv_bytes_per_token_per_gpu(arch("llama-3.1-405b"), 2, tp=8, pp=2) == 2 * 63 * 1 * 128 * 2


def test_tensor_parallel_rule_follows_vllm():
    qwen7b = arch("qwen2.5-7b")  # 28 heads, 4 kv heads
    assert tensor_parallel_ok(qwen7b, 2) and tensor_parallel_ok(qwen7b, 4)
    assert not tensor_parallel_ok(qwen7b, 8)  # 28 % 8 != 0
    odd = ArchitectureSpec(layers=4, attention_heads=24, kv_heads=3, head_dim=64)
    assert not tensor_parallel_ok(odd, 2)  # 3 kv heads, 2 % 3 != 0 and 3 % 2 != 0


def test_prefill_estimate():
    # 2 x 8.03e9 x 8192 FLOPs / (1 GPU x 362e12 x 0.4) = 0.9085 s
    assert prefill_ms(8_030_000_000, 8192, 1, 362) == pytest.approx(908.6, abs=0.1)


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
        assert model.decisions[0].reason.startswith("cheapest layout that fits")
        assert model.decisions[0].rejected, "the plan lists the alternatives it rejected"


def test_70b_hand_checked_layout(plans):
    # 70.6B bf16 = 131.5 GiB. g6e.12xlarge: 4 x L40S, 44.4 GiB usable each.
    # budget = 4 x (44.4 x 0.90 - 1.5) = 153.84 GiB; left for KV = 22.34 GiB = 5.585 GiB per GPU
    # per GPU a token costs 2 x 80 x 2 x 128 x 2 = 81,920 B -> floor(5.585 GiB / 80 KiB) tokens
    mid = plans["prod"].model("llama-3-3-70b-instruct")
    assert mid.instance_type == "g6e.12xlarge" and mid.tensor_parallel_size == 4
    per_gpu_left = 44.4 * 0.90 - 1.5 - 70_600_000_000 * 2 / GIB / 4
    assert mid.kv_cache_tokens == int(per_gpu_left * GIB // 81_920)
    assert mid.max_num_seqs == mid.kv_cache_tokens // 8192 == 8
    assert mid.replicas == math.ceil(32 / 8)  # 32 peak sequences / 8 per replica
    assert mid.min_replicas == 2  # 99.9% availability: two zones


def test_405b_needs_pipeline_parallel_on_p5(plans):
    # 405.85B bf16 = 756 GiB > one p5.48xlarge (8 x 79.6 x 0.9 - 12 = 561 GiB) -> pp=2 (16 GPUs)
    big = plans["prod"].model("llama-3-1-405b-instruct")
    assert big.weights_gib == pytest.approx(405_850_000_000 * 2 / GIB, abs=0.01)
    assert (big.instance_type, big.tensor_parallel_size, big.pipeline_parallel_size) == ("p5.48xlarge", 8, 2)
    assert "--distributed-executor-backend" in big.args and "ray" in big.args
    rejected = {a.option.split()[0]: a.reason for a in big.decisions[0].rejected}
    assert "TTFT" in rejected["p4d.24xlarge"]  # A100s are too slow for the 4 s time-to-first-token


def test_dev_single_replica_policy(plans):
    dev = plans["dev"]
    assert all(m.replicas == 1 for m in dev.models)
    assert "llama-3-1-405b-instruct" not in {m.name for m in dev.models}  # disabled in dev
    assert all(g.capacity_type == "spot" for g in dev.node_groups)


def test_env_defaults_are_documented_values():
    env = EnvironmentSpec(name="x", region="us-east-1")
    assert env.vllm.gpu_memory_utilization == 0.90
    assert env.capacity_type == "on-demand"
