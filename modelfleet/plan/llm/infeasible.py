"""Why no allowed layout serves an LLM: the constraint that binds, the candidates that came closest (by
instance type and layout) and the fixes that would work, never a generic "does not fit".

Each instance type reports the layout that got furthest through the checks (precision, weights, KV cache
for one context, time to first token of one prompt alone, time per output token of one stream alone); the
error names the furthest stage any of them reached, since that is the constraint left to fix: a 405B model
that p5.48xlarge holds but prefills too slowly is a TTFT problem, not a memory problem. (Any load is
otherwise served by enough replicas: only a layout too slow for a single request is infeasible.)
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...errors import Issue
from ...spec.environment import EnvironmentSpec
from ...spec.models import LlmModelSpec
from ..hardware.instances import InstanceCatalogue, InstanceType
from .shape import llm_weights_gib, weight_dtype
from ..rejection import CONTEXT, MEMORY, PRECISION, TPOT, TTFT, Rejection, closeness
from ..sizing import MAX_PIPELINE_STAGES

SHOWN = 3  # closest candidates named in the message
MIN_CONTEXT_TOKENS = 128  # the smallest sla.max_context_tokens the language accepts


def explain_infeasible(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                       rejections: list[Rejection], index: int,
                       fits_on: Callable[[InstanceType], bool]) -> Issue:
    if model.overrides.instance_type and not rejections:
        return Issue("", 0, 0, f"models[{index}].overrides.instance_type",
                     f"{model.name}: {model.overrides.instance_type} is unknown or not in this environment's "
                     f"families ({', '.join(env.instance_families)})", "pick an allowed instance type")
    stage = max((r.stage for r in rejections), default=-1)
    closest = sorted((r for r in rejections if r.stage == stage), key=closeness, reverse=True)[:SHOWN]
    explain = {TPOT: _tpot, TTFT: _ttft, CONTEXT: _context, MEMORY: _memory, PRECISION: _precision}.get(stage, _layout)
    message, fixes = explain(model, closest)
    outside = sorted({i.family for i in catalogue.instances.values()
                      if i.family not in env.instance_families and fits_on(i)})
    if outside:
        fixes.insert(0, f"allow {' or '.join(outside)} (instanceFamilies)")
    return Issue("", 0, 0, f"models[{index}]", f"{model.name}: {message}", "; or ".join(fixes))


def _ttft(model: LlmModelSpec, closest: list[Rejection]) -> tuple[str, list[str]]:
    prompt, p99 = model.sla.input_tokens(), model.sla.p99_ttft_ms
    fastest = closest[0].figure
    if fastest <= 0:  # no figure: a queue that outgrew its simulation (fit.py)
        shown = "; ".join(f"{r.option}: {r.reason}" for r in closest)
        return (f"time to first token binds: no allowed layout that holds the weights meets the p99 TTFT of {p99:g} "
                f"ms at peak; the closest: {shown}"), ["lower the peak load", *_quantize_hint(model)]
    shown = "; ".join(f"{r.option}: {math.ceil(r.figure):,} ms ({r.reason})" for r in closest)
    fixes = [f"raise sla.p99_ttft_ms to at least {math.ceil(fastest)}"]
    shorter = int(prompt * p99 / fastest)
    if shorter >= 1 and shorter < prompt:
        fixes.append(f"declare shorter prompts (sla.avg_input_tokens {shorter}; prefill time grows with them)")
    return (f"time to first token binds: on every allowed layout that holds the weights, the p99 TTFT of {p99:g} ms "
            f"is missed; the fastest: {shown}"), fixes + _quantize_hint(model)


def _tpot(model: LlmModelSpec, closest: list[Rejection]) -> tuple[str, list[str]]:
    p99 = model.sla.p99_tpot_ms or 0.0
    shown = "; ".join(f"{r.option}: {r.figure:,.1f} ms" for r in closest)
    fixes = [f"raise sla.p99_tpot_ms to at least {math.ceil(closest[0].figure * 10) / 10:g}"]
    return (f"time per output token binds: on every allowed layout fast enough to prefill, one stream alone decodes "
            f"slower than the p99 TPOT of {p99:g} ms; the fastest: {shown}"), fixes + _quantize_hint(model)


def _context(model: LlmModelSpec, closest: list[Rejection]) -> tuple[str, list[str]]:
    context = model.sla.max_context_tokens
    shown = ", ".join(f"{r.option} {r.figure:,.0f} tokens" for r in closest)
    fixes = [f"lower sla.max_context_tokens to {int(closest[0].figure)}"] if closest[0].figure >= MIN_CONTEXT_TOKENS else []
    if model.overrides.kv_cache_dtype != "fp8":
        fixes.append("set overrides.kv_cache_dtype: fp8 (halves the KV cache)")
    return (f"KV cache binds: no allowed layout has room for one {context}-token context beside the weights; "
            f"the most: {shown}"), fixes + _quantize_hint(model)


def _memory(model: LlmModelSpec, closest: list[Rejection]) -> tuple[str, list[str]]:
    shown = "; ".join(f"{r.option}: {r.reason}" for r in closest)
    return (f"GPU memory binds: {llm_weights_gib(model):.0f} GiB of {weight_dtype(model)} weights fit no allowed "
            f"layout (one node, or up to {MAX_PIPELINE_STAGES} whole nodes); the largest: {shown}"), _quantize_hint(model)


def _precision(model: LlmModelSpec, closest: list[Rejection]) -> tuple[str, list[str]]:
    return (f"precision binds: no allowed GPU runs it ({closest[0].reason})",
            ["use a checkpoint the allowed GPUs run (e.g. size.dtype: bf16)"])


def _layout(model: LlmModelSpec, closest: list[Rejection]) -> tuple[str, list[str]]:
    reason = closest[0].reason if closest else "no allowed instance type"
    return f"no layout to size: {reason}", ["leave overrides.tensor_parallel_size and pipeline_parallel_size to the "
                                            "compiler, or allow more instance families"]


def _quantize_hint(model: LlmModelSpec) -> list[str]:
    if weight_dtype(model) not in ("bf16", "fp16", "fp32"):
        return []
    return ["serve a pre-quantized checkpoint: size.dtype: int4 with quantization: awq_marlin (or gptq_marlin), "
            "or size.dtype: fp8 with quantization: fp8 on L4, L40S, H100 or H200"]
