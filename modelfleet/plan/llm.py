"""Placing one LLM: instance type, tensor/pipeline parallelism, max_num_seqs and replicas.

Every (instance type, tp) on one node that the environment allows is sized; the cheapest that fits the
memory, the context and the time-to-first-token SLA wins. Pipeline parallelism across nodes is sized only
when no allowed single node holds the model: a model split over nodes pays cross-node latency and a
larger blast radius, and four one-GPU nodes are not a cheaper way to hold what one four-GPU node holds.
Candidates are priced at the nodes the node group will really have: the GPUs their pods take, and at
least one node per zone the availability floor spreads replicas over.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..spec.environment import EnvironmentSpec
from ..errors import Issue
from .instances import InstanceCatalogue, InstanceType
from .llm_infeasible import explain_infeasible
from .types import Alternative, Decision
from .precision import Precision, llm_weights_gib, precision_on, unsupported, weight_dtype
from .rejection import CONTEXT, MEMORY, PRECISION, TTFT, Rejection, closeness
from .sizing import (
    LLM_RUNTIME_OVERHEAD_GIB_PER_GPU,
    MAX_PIPELINE_STAGES,
    PREFILL_MFU,
    availability_floor,
    kv_bytes_per_token_per_gpu,
    nodes_for_pods,
    prefill_ms,
    tensor_parallel_ok,
)
from ..spec.models import LlmModelSpec
from ..spec.units import DTYPE_BYTES, GIB, format_param_count

PRICE_REFERENCE_REGION = "us-east-1"  # ranks instance types when the stack's region has no price data
TP_SIZES = (1, 2, 4, 8)

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
    precision: Precision

    @property
    def label(self) -> str:
        return f"{self.instance.name} tp={self.tp} pp={self.pp}"


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


def nodes_for_replicas(instance: InstanceType, tp: int, pp: int, min_replicas: int, replicas: int) -> int:
    """Nodes ``replicas`` take, as the node group is sized (compiler._node_groups): their pods of ``tp``
    GPUs packed onto nodes, and at least one node per zone the ``min_replicas`` spread over."""
    spread = min_replicas * pp if min_replicas >= 2 else 0
    return max(nodes_for_pods({tp: replicas * pp}, instance.gpus), spread)


def price(instance: InstanceType, region: str) -> float:
    return instance.price(region) or instance.price(PRICE_REFERENCE_REGION) or math.inf


def llm_params(model: LlmModelSpec) -> tuple[int, str | None]:
    """Parameters for the prefill estimate: declared or from the preset; else derived from size.memory_gib
    at the weights' dtype, with a note saying so (the estimate is never skipped)."""
    params = model.resolved_params()
    if params:
        return params, None
    memory = model.size.memory_gib or 0.0
    derived = max(1, int(memory * GIB / DTYPE_BYTES[weight_dtype(model)]))
    return derived, (f"TTFT estimated for {format_param_count(derived)} parameters derived from size.memory_gib "
                     f"{memory:g} GiB at {weight_dtype(model)}; declare size.params for a better estimate")


def size_candidate(model: LlmModelSpec, env: EnvironmentSpec, instance: InstanceType, tp: int,
                   pp: int) -> LlmCandidate | Rejection:
    """Memory, context, TTFT and replicas for one layout; a Rejection says what does not fit."""
    label = f"{instance.name} tp={tp} pp={pp}"
    precision = precision_on(model, instance.gpu, env.vllm.image)
    util = model.overrides.gpu_memory_utilization or env.vllm.gpu_memory_utilization
    budget = instance.gpu_memory_gib * util - LLM_RUNTIME_OVERHEAD_GIB_PER_GPU
    weights = llm_weights_gib(model) / (tp * pp)
    if weights * precision.load_factor >= budget:
        return Rejection(label, _memory_reason(weights, precision, budget), MEMORY, budget * tp * pp)
    per_token = kv_bytes_per_token_per_gpu(model.resolved_architecture(), precision.kv_bytes, tp, pp)
    tokens = int((budget - weights) * GIB // per_token)
    context = model.sla.max_context_tokens
    if tokens < context:
        return Rejection(label, f"KV cache holds {tokens} tokens, less than one {context}-token context", CONTEXT,
                         tokens)
    ttft = prefill_ms(llm_params(model)[0], context, tp, instance.gpu.fp16_tflops)
    if ttft > model.sla.p99_ttft_ms:
        return Rejection(label, f"a full {context}-token prefill on an idle replica takes an estimated {ttft:.0f} ms, "
                         f"more than the p99 TTFT of {model.sla.p99_ttft_ms:.0f} ms", TTFT, ttft)
    avg = model.sla.avg_context_tokens or context
    seqs = model.overrides.max_num_seqs or min(env.vllm.max_num_seqs_cap, max(1, tokens // avg))
    lo, replicas, _ = replica_bounds(model, env, seqs)
    nodes = nodes_for_replicas(instance, tp, pp, lo, replicas)
    return LlmCandidate(instance, tp, pp, seqs, tokens, (budget - weights) * tp * pp, ttft, replicas, nodes,
                        nodes * price(instance, env.region), precision)


def _memory_reason(weights: float, precision: Precision, budget: float) -> str:
    if weights < budget:  # fits once quantized, not while the 16-bit checkpoint loads
        return (f"loading the 16-bit checkpoint to quantize it takes {weights * precision.load_factor:.1f} GiB per "
                f"GPU, more than the {budget:.1f} GiB budget (this vLLM release quantizes after loading)")
    return f"weights {weights:.1f} GiB per GPU exceed the {budget:.1f} GiB budget"


def _layouts(model: LlmModelSpec, instance: InstanceType, multi_node: bool) -> list[tuple[int, int]]:
    """(tp, pp) pairs to size: on one node any tp that fits the heads; across nodes whole nodes only
    (tp = GPUs per node, pp = nodes), fewest nodes first."""
    arch = model.resolved_architecture()
    tps = [t for t in TP_SIZES if t <= instance.gpus and tensor_parallel_ok(arch, t)]
    if model.overrides.tensor_parallel_size:
        tps = [t for t in tps if t == model.overrides.tensor_parallel_size]
    pinned = model.overrides.pipeline_parallel_size
    if not multi_node:
        return [(t, 1) for t in tps] if pinned in (None, 1) else []
    stages = [pinned] if pinned else list(range(2, MAX_PIPELINE_STAGES + 1))
    return [(t, p) for p in stages if p > 1 for t in tps if t == instance.gpus]


def best_for_instance(model: LlmModelSpec, env: EnvironmentSpec, instance: InstanceType,
                      multi_node: bool) -> LlmCandidate | Rejection:
    """The cheapest layout on one instance type, or the rejection of the layout that came closest.
    Across nodes, more stages are only tried while fewer do not fit."""
    problem = unsupported(model, instance.gpu)
    if problem:
        return Rejection(instance.name, problem, PRECISION)
    best: LlmCandidate | None = None
    closest: Rejection | None = None
    for tp, pp in _layouts(model, instance, multi_node):
        if best is not None and pp > best.pp:
            break
        result = size_candidate(model, env, instance, tp, pp)
        if isinstance(result, LlmCandidate):
            if best is None or (result.usd_per_hour, result.tp) < (best.usd_per_hour, best.tp):
                best = result
        elif closest is None or closeness(result) > closeness(closest):
            closest = result
    if best is not None:
        return best
    where = "across whole nodes" if multi_node else "on one node"
    return closest or Rejection(instance.name, f"no tensor-parallel size {where} fits its {instance.gpus} GPU(s), "
                                               "the model's attention and KV heads and the overrides")


def choose_llm_layout(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                      index: int) -> tuple[LlmCandidate, Decision] | Issue:
    problem = _override_problem(model, env, catalogue, index)
    if problem is not None:
        return problem
    instances = _allowed_instances(model, env, catalogue)
    results = [best_for_instance(model, env, inst, multi_node=False) for inst in instances]
    single_node = any(isinstance(r, LlmCandidate) for r in results)
    if not single_node:
        results = [_further(r, best_for_instance(model, env, inst, multi_node=True))
                   for r, inst in zip(results, instances)]
    fits = sorted((r for r in results if isinstance(r, LlmCandidate)),
                  key=lambda c: (c.usd_per_hour, c.instance.gpus * c.pp, c.instance.name))
    if not fits:
        return explain_infeasible(model, env, catalogue, [r for r in results if isinstance(r, Rejection)], index,
                                  lambda inst: _fits_anywhere(model, env, inst))
    chosen = fits[0]
    rejected = tuple(
        Alternative(option=r.label, reason=f"costs {r.usd_per_hour:.2f} USD/h for {r.replicas} replica(s) "
                    f"on {r.nodes} node(s)", usd_per_hour=round(r.usd_per_hour, 4)) for r in fits[1:]
    ) + tuple(Alternative(option=r.option, reason=r.reason + _multi_node_note(r, chosen, single_node))
              for r in results if isinstance(r, Rejection))
    return chosen, Decision(choice=chosen.label, reason=_reason(model, chosen), rejected=rejected)


def _further(single: LlmCandidate | Rejection, multi: LlmCandidate | Rejection) -> LlmCandidate | Rejection:
    if isinstance(multi, LlmCandidate) or isinstance(single, LlmCandidate):
        return multi if isinstance(multi, LlmCandidate) else single
    return multi if closeness(multi) > closeness(single) else single


def _multi_node_note(rejection: Rejection, chosen: LlmCandidate, single_node: bool) -> str:
    """Why a type whose one node is too small was not split over several: one node of another type holds it."""
    if not single_node or rejection.stage not in (MEMORY, CONTEXT):
        return ""
    return (f"; pipeline parallelism across nodes is used only when no allowed single node holds the model, "
            f"and {chosen.instance.name} does")


def _reason(model: LlmModelSpec, chosen: LlmCandidate) -> str:
    where = "one GPU" if chosen.tp * chosen.pp == 1 else (
        f"{chosen.tp} GPUs of one node" if chosen.pp == 1 else
        f"{chosen.pp} nodes of {chosen.tp} GPUs (no allowed single node holds it)")
    context = model.sla.max_context_tokens
    return (f"cheapest layout that fits: {llm_weights_gib(model):.1f} GiB of {chosen.precision.weights} weights on "
            f"{where}, KV cache for {chosen.kv_cache_tokens} tokens ({chosen.max_num_seqs} sequences of "
            f"{model.sla.avg_context_tokens or context} tokens); estimated TTFT {chosen.ttft_ms:.0f} ms <= p99 "
            f"{model.sla.p99_ttft_ms:.0f} ms (one full {context}-token prefill on an idle replica at "
            f"{PREFILL_MFU:.0%} of FP16 peak; waiting behind other prefills is not included); {chosen.replicas} "
            f"replica(s) on {chosen.nodes} node(s) = {chosen.usd_per_hour:.2f} USD/h")


def _allowed_instances(model: LlmModelSpec, env: EnvironmentSpec,
                       catalogue: InstanceCatalogue) -> tuple[InstanceType, ...]:
    if model.overrides.instance_type:
        inst = catalogue.instances.get(model.overrides.instance_type)
        return (inst,) if inst is not None and inst.family in env.instance_families else ()
    return catalogue.in_families(env.instance_families)


def _override_problem(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                      index: int) -> Issue | None:
    """A pinned tensor_parallel_size vLLM would refuse for this model, or that no allowed node has."""
    tp = model.overrides.tensor_parallel_size
    if tp is None:
        return None
    arch = model.resolved_architecture()
    path = f"models[{index}].overrides.tensor_parallel_size"
    valid = [t for t in TP_SIZES if tensor_parallel_ok(arch, t)]
    if not tensor_parallel_ok(arch, tp):
        return Issue("", 0, 0, path, f"{model.name}: tensor_parallel_size {tp} does not fit the model's "
                     f"{arch.attention_heads} attention heads and {arch.kv_heads} KV heads (vLLM: heads % tp == 0, "
                     "and kv_heads % tp == 0, or tp % kv_heads == 0 when tp > kv_heads)",
                     f"use {' or '.join(map(str, valid))}, or leave it to the compiler")
    most = max((i.gpus for i in _allowed_instances(model, env, catalogue)), default=0)
    if most and tp > most:
        return Issue("", 0, 0, path, f"{model.name}: tensor_parallel_size {tp} needs {tp} GPUs in one node; the "
                     f"allowed instance types have at most {most}", "lower it, or allow a family with larger nodes")
    return None


def _fits_anywhere(model: LlmModelSpec, env: EnvironmentSpec, instance: InstanceType) -> bool:
    return any(isinstance(best_for_instance(model, env, instance, multi), LlmCandidate) for multi in (False, True))
