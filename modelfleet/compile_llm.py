"""Placing one LLM: instance type, tensor/pipeline parallelism, max_num_seqs and replicas.

Every (instance type, tp, pp) that the environment allows is sized; the cheapest that fits the memory,
the context and the time-to-first-token SLA wins, and the others are kept as rejected alternatives.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .environment import EnvironmentSpec
from .errors import Issue
from .instances import InstanceCatalogue, InstanceType
from .plan import Alternative, Decision
from .sizing import (
    LLM_RUNTIME_OVERHEAD_GIB_PER_GPU,
    availability_floor,
    kv_bytes_per_token_per_gpu,
    prefill_ms,
    tensor_parallel_ok,
    weights_gib,
)
from .spec import LlmModelSpec
from .units import DTYPE_BYTES, GIB

MAX_PIPELINE_STAGES = 8  # beyond 8 nodes per replica, cross-node latency dominates; nobody serves that way
PRICE_REFERENCE_REGION = "us-east-1"  # ranks instance types when the stack's region has no price data


@dataclass(frozen=True)
class LlmCandidate:
    instance: InstanceType
    tp: int
    pp: int
    max_num_seqs: int
    kv_cache_tokens: int
    kv_cache_gib: float
    ttft_ms: float
    replicas: int
    nodes: int
    usd_per_hour: float

    @property
    def label(self) -> str:
        return f"{self.instance.name} tp={self.tp} pp={self.pp}"


@dataclass(frozen=True)
class Rejection:
    option: str
    reason: str


def load_sequences(model: LlmModelSpec) -> int:
    """Peak sequences in flight: declared, or output tokens/s divided by one stream's decode speed."""
    if model.sla.peak_concurrent_sequences is not None:
        return model.sla.peak_concurrent_sequences
    rate = model.sla.peak_output_tokens_per_s or 0.0
    return max(1, math.ceil(rate / model.profile.output_tokens_per_s_per_sequence))


def replica_bounds(model: LlmModelSpec, env: EnvironmentSpec, max_num_seqs: int) -> tuple[int, int, int]:
    """(min, desired, max) replicas: load at peak, availability floor, the environment's policy."""
    policy = env.replicas
    if policy.single_replica:
        return 1, 1, 1
    floor = availability_floor(model.sla.availability, policy.ha_availability, policy.ha3_availability)
    desired = model.overrides.replicas or max(floor, math.ceil(load_sequences(model) / max_num_seqs))
    # A pin below the availability floor is the user's call; min must not exceed it (as for Triton servers).
    return min(floor, desired), desired, max(desired, math.ceil(desired * policy.max_scale_factor))


def _price(instance: InstanceType, region: str) -> float:
    return instance.price(region) or instance.price(PRICE_REFERENCE_REGION) or math.inf


def size_candidate(model: LlmModelSpec, env: EnvironmentSpec, instance: InstanceType, tp: int,
                   pp: int) -> LlmCandidate | Rejection:
    """Memory, context, TTFT and replicas for one layout; a Rejection says what does not fit."""
    arch = model.resolved_architecture()
    params = model.resolved_params() or 0
    label = f"{instance.name} tp={tp} pp={pp}"
    util = model.overrides.gpu_memory_utilization or env.vllm.gpu_memory_utilization
    kv_bytes = 1.0 if model.overrides.kv_cache_dtype == "fp8" else DTYPE_BYTES[_dtype(model)]
    budget = instance.gpu_memory_gib * util - LLM_RUNTIME_OVERHEAD_GIB_PER_GPU
    weights = llm_weights_gib(model) / (tp * pp)
    if weights >= budget:
        return Rejection(label, f"weights {weights:.1f} GiB per GPU exceed the {budget:.1f} GiB budget")
    per_token = kv_bytes_per_token_per_gpu(arch, kv_bytes, tp, pp)
    tokens = int((budget - weights) * GIB // per_token)
    if tokens < model.sla.max_context_tokens:
        return Rejection(label, f"KV cache holds {tokens} tokens, less than one {model.sla.max_context_tokens}-token context")
    ttft = prefill_ms(params, model.sla.max_context_tokens, tp, instance.gpu.fp16_tflops)
    if ttft > model.sla.p99_ttft_ms:
        return Rejection(label, f"estimated TTFT {ttft:.0f} ms for a full context exceeds p99 {model.sla.p99_ttft_ms:.0f} ms")
    avg = model.sla.avg_context_tokens or model.sla.max_context_tokens
    seqs = model.overrides.max_num_seqs or min(env.vllm.max_num_seqs_cap, max(1, tokens // avg))
    _, replicas, _ = replica_bounds(model, env, seqs)
    nodes = replicas * pp if pp > 1 else math.ceil(replicas / (instance.gpus // tp))
    kv_gib = (budget - weights) * tp * pp
    return LlmCandidate(instance, tp, pp, seqs, tokens, kv_gib, ttft, replicas, nodes, nodes * _price(instance, env.region))


def _dtype(model: LlmModelSpec) -> str:
    return model.size.dtype or "bf16"


def llm_weights_gib(model: LlmModelSpec) -> float:
    """Weights in GiB: declared memory, or params (declared or from the preset) x dtype bytes."""
    if model.size.memory_gib is not None:
        return model.size.memory_gib
    return weights_gib(model.resolved_params() or 0, _dtype(model))


def _layouts(model: LlmModelSpec, instance: InstanceType) -> list[tuple[int, int]]:
    """(tp, pp) pairs to size: tp within a node; pp only with whole nodes (tp = GPUs per node)."""
    arch = model.resolved_architecture()
    tps = [t for t in (1, 2, 4, 8) if t <= instance.gpus and tensor_parallel_ok(arch, t)]
    if model.overrides.tensor_parallel_size:
        tps = [t for t in tps if t == model.overrides.tensor_parallel_size]
    pps = [model.overrides.pipeline_parallel_size] if model.overrides.pipeline_parallel_size else list(
        range(1, MAX_PIPELINE_STAGES + 1))
    return [(t, p) for t in tps for p in pps if p == 1 or t == instance.gpus]


def _best_for_instance(model: LlmModelSpec, env: EnvironmentSpec,
                       instance: InstanceType) -> LlmCandidate | Rejection:
    """The cheapest layout on one instance type; larger pp is only tried when smaller pp does not fit."""
    best: LlmCandidate | None = None
    first_rejection: Rejection | None = None
    for tp, pp in _layouts(model, instance):
        if best is not None and pp > best.pp:
            break
        result = size_candidate(model, env, instance, tp, pp)
        if isinstance(result, LlmCandidate):
            if best is None or (result.usd_per_hour, result.tp) < (best.usd_per_hour, best.tp):
                best = result
        elif first_rejection is None or ("exceed the" in first_rejection.reason and "exceed the" not in result.reason):
            first_rejection = result  # the smallest layout's reason, unless only a larger one got past memory
    if best is not None:
        return best
    return first_rejection or Rejection(instance.name, f"no tensor-parallel size fits its {instance.gpus} GPU(s) "
                                                       "and the model's attention heads")


def choose_llm_layout(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                      index: int) -> tuple[LlmCandidate, Decision] | Issue:
    instances = _allowed_instances(model, env, catalogue)
    results = [_best_for_instance(model, env, inst) for inst in instances]
    fits = sorted((r for r in results if isinstance(r, LlmCandidate)),
                  key=lambda c: (c.usd_per_hour, c.instance.gpus * c.pp, c.instance.name))
    if not fits:
        return _infeasible(model, env, catalogue, results, index)
    chosen = fits[0]
    rejected = tuple(
        Alternative(option=r.label, reason=f"costs {r.usd_per_hour:.2f} USD/h for {r.replicas} replica(s) "
                    f"on {r.nodes} node(s)", usd_per_hour=round(r.usd_per_hour, 4)) for r in fits[1:]
    ) + tuple(Alternative(option=r.option, reason=r.reason) for r in results if isinstance(r, Rejection))
    where = "one GPU" if chosen.tp * chosen.pp == 1 else (
        f"{chosen.tp} GPUs of one node" if chosen.pp == 1 else f"{chosen.pp} nodes of {chosen.tp} GPUs")
    reason = (f"cheapest layout that fits: {llm_weights_gib(model):.1f} GiB weights on {where}, KV cache for "
              f"{chosen.kv_cache_tokens} tokens ({chosen.max_num_seqs} sequences of "
              f"{model.sla.avg_context_tokens or model.sla.max_context_tokens} tokens), estimated TTFT "
              f"{chosen.ttft_ms:.0f} ms <= {model.sla.p99_ttft_ms:.0f} ms; {chosen.replicas} replica(s) on "
              f"{chosen.nodes} node(s) = {chosen.usd_per_hour:.2f} USD/h")
    return chosen, Decision(choice=chosen.label, reason=reason, rejected=rejected)


def _allowed_instances(model: LlmModelSpec, env: EnvironmentSpec,
                       catalogue: InstanceCatalogue) -> tuple[InstanceType, ...]:
    if model.overrides.instance_type:
        inst = catalogue.instances.get(model.overrides.instance_type)
        return (inst,) if inst is not None and inst.family in env.instance_families else ()
    return catalogue.in_families(env.instance_families)


def _infeasible(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                results: list[LlmCandidate | Rejection], index: int) -> Issue:
    if model.overrides.instance_type and not results:
        return Issue("", 0, 0, f"models[{index}].overrides.instance_type",
                     f"{model.name}: {model.overrides.instance_type} is unknown or not in this environment's "
                     f"families ({', '.join(env.instance_families)})", "pick an allowed instance type")
    need = llm_weights_gib(model)
    biggest = max(catalogue.instances.values(), key=lambda i: i.total_gpu_memory_gib)
    outside = sorted({i.family for i in catalogue.instances.values() if i.family not in env.instance_families
                      and _fits_somewhere(model, env, i)})
    hints = [f"allow {' or '.join(outside)}"] if outside else []
    if _dtype(model) in ("bf16", "fp16", "fp32"):
        hints.append("use fp8 weights (size.dtype: fp8)")
    hints.append("lower sla.max_context_tokens or raise sla.p99_ttft_ms")
    detail = "; ".join(sorted({r.reason for r in results if isinstance(r, Rejection)})[:3])
    return Issue("", 0, 0, f"models[{index}]",
                 f"{model.name}: no allowed instance type fits: needs {need:.0f} GiB of weights plus KV cache "
                 f"(largest node in the catalogue: {biggest.name}, {biggest.total_gpu_memory_gib:.0f} GiB){'; ' + detail if detail else ''}",
                 "; ".join(hints))


def _fits_somewhere(model: LlmModelSpec, env: EnvironmentSpec, instance: InstanceType) -> bool:
    return isinstance(_best_for_instance(model, env, instance), LlmCandidate)
