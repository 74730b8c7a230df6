"""What the plan says about an LLM's layout: why this one, what binds, what the others would have done, and
what a MoE, MLA or sliding-window architecture changes. Text only: every figure comes from llm/llm_fit."""

from __future__ import annotations

from ...errors import Issue
from ...spec.environment import EnvironmentSpec
from ...spec.models import LlmModelSpec
from ...spec.units import format_param_count
from ..hardware.instances import InstanceCatalogue, InstanceType
from .candidate import LlmCandidate, Outcome, Sized
from .shape import llm_weights_gib, model_params
from .speed.load import Fit
from .verify import miss_phrase
from ..rejection import CONTEXT, MEMORY, Rejection, closeness
from ..sizing import on_demand_replicas, tensor_parallel_ok
from ..types import Alternative, Decision

TP_SIZES = (1, 2, 4, 8)


def decision_for(model: LlmModelSpec, env: EnvironmentSpec, chosen: LlmCandidate, shown: dict[str, Outcome | None],
                 found: dict[str, list[Outcome]], single_node: bool) -> Decision:
    others = [o for o in shown.values() if o is not None and o is not chosen]
    priced = sorted((o for o in others if isinstance(o, LlmCandidate)), key=lambda c: c.usd_per_hour)
    untimed = sorted((o for o in others if isinstance(o, Sized)), key=lambda s: s.floor_usd)
    rejected = tuple(Alternative(option=c.label, reason=f"costs {c.usd_per_hour:.2f} USD/h for {c.replicas} replica(s) "
                                 f"on {c.nodes} node(s) ({figures(c.fit)})", usd_per_hour=round(c.usd_per_hour, 4))
                     for c in priced)
    rejected += tuple(Alternative(option=s.label, reason=f"costs at least {s.floor_usd:.2f} USD/h {s.bound}, "
                                  f"more than {chosen.usd_per_hour:.2f}: not timed", usd_per_hour=round(s.floor_usd, 4))
                      for s in untimed)
    misses = sorted((r for r in others if isinstance(r, Rejection)), key=closeness, reverse=True)  # nearest first
    rejected += tuple(Alternative(option=r.option, reason=r.reason + _multi_node_note(r, chosen, single_node))
                      for r in misses)
    return Decision(choice=chosen.label, reason=reason(model, env, chosen), rejected=rejected)


def kept_ttft(ms: float) -> float:
    """A TTFT figure as the plan keeps it (compiler.estimates_of): what every text shows, rounded from that,
    so the explanation and the estimates never disagree by a double rounding (878.46 -> 878.5 -> 879 beside
    878.46 -> 878)."""
    return round(ms, 1)


def kept_tpot(ms: float) -> float:
    """A TPOT figure as the plan keeps it (compiler.estimates_of; kept_ttft)."""
    return round(ms, 2)


def figures(fit: Fit) -> str:
    sim = fit.simulation
    return (f"simulated p99 TTFT {kept_ttft(fit.ttft_p99_ms):,.0f} ms, p99 TPOT {kept_tpot(sim.tpot_p99_ms):.1f} ms, "
            f"max_num_seqs {fit.max_num_seqs}")


def versus(value: float, bound: float, target: float, digits: str = ",.0f", judged: float | None = None) -> str:
    """``X ms (95% bound B) <= T ms`` when the bound meets the target, else what misses: never a false
    comparison. ``judged``: the unrounded bound the SLA was judged on, when ``bound`` is the rounded one shown."""
    if (bound if judged is None else judged) <= target:
        return f"{value:{digits}} ms (95% bound {bound:{digits}}) <= {target:{digits}} ms"
    return miss_phrase(value, bound, target, digits)


def reason(model: LlmModelSpec, env: EnvironmentSpec, chosen: LlmCandidate) -> str:
    fit, sla = chosen.fit, model.sla
    where = "one GPU" if chosen.tp * chosen.pp == 1 else (
        f"{chosen.tp} GPUs of one node" if chosen.pp == 1 else
        f"{chosen.pp} nodes of {chosen.tp} GPUs (no allowed single node serves it)")
    sim = fit.simulation
    tpot = ("p99 TPOT " + versus(kept_tpot(sim.tpot_p99_ms), kept_tpot(sim.tpot_p99_high_ms), sla.p99_tpot_ms, ".1f",
                                  judged=sim.tpot_p99_high_ms)
            if sla.p99_tpot_ms is not None else f"p99 TPOT {kept_tpot(sim.tpot_p99_ms):.1f} ms (no p99_tpot_ms set)")
    ttft = versus(kept_ttft(fit.ttft_p99_ms), kept_ttft(sim.ttft_p99_high_ms), sla.p99_ttft_ms,
                  judged=sim.ttft_p99_high_ms)
    meets = "Cheapest layout that meets the SLA at peak" if fit.shortfall is None else (
        "Cheapest layout at the pinned replicas (it misses the SLA)")
    return (f"binding: {binding_text(model, chosen)}. {meets}: "
            f"{llm_weights_gib(model):.1f} GiB of {chosen.precision.weights} weights on {where}; step times from "
            f"{chosen.source}: one {sla.input_tokens():,}-token prompt prefills in {fit.prefill_ms:,.0f} ms on an idle "
            f"replica; at peak, simulated ({sim.simulated_requests:,} requests of the declared traffic, queueing for a "
            f"slot and behind other prompts included): p99 TTFT "
            f"{ttft}, {tpot}; "
            f"{fit.output_tokens_per_s_per_replica:,.0f} output tokens/s per replica; max_num_seqs {fit.max_num_seqs}: "
            f"{_seqs_text(model, chosen)}; --max-num-batched-tokens {fit.max_num_batched_tokens:,}; "
            f"{chosen.replicas} replica(s) on {chosen.nodes} node(s) = {chosen.usd_per_hour:.2f} USD/h ({priced_as(env, chosen)})")


def priced_as(env: EnvironmentSpec, chosen: LlmCandidate) -> str:
    """How a layout's USD/h was priced (search.nodes_usd), in words."""
    if on_demand_replicas(env, chosen.min_replicas):
        nodes = "the nodes of its availability floor on-demand (a spot reclaim can take every spot node of a type at " \
                "once), the others at their spot price"
    else:
        nodes = f"each node at its {env.capacity_type} price"
    reserved = ", a reserved node's instance-hour paid already" if any(
        r.instance_type == chosen.instance.name for r in env.capacity_reservations) else ""
    return f"{nodes}, with its root volume{reserved}, as the cost preview prices it"


def _seqs_text(model: LlmModelSpec, chosen: LlmCandidate) -> str:
    fit, kv = chosen.fit, chosen.sized.kv_seqs
    held = f"the KV cache holds {kv:,} sequences of {model.sla.context_tokens():,} tokens"
    at_max = f"TPOT {fit.tpot_at_max_ms:.1f} ms with all {fit.max_num_seqs} running"
    return {
        "tpot": f"the most sequences whose TPOT stays within the p99 ({at_max}; {held})",
        "memory": f"as many as fit: {held}; {at_max}",
        "max_num_seqs cap": f"the stack's cap (vllm.maxNumSeqsCap); {held}; {at_max}",
        "overrides.max_num_seqs": f"as overrides.max_num_seqs pins it; {held}; {at_max}",
        "simulation": f"the most the KV cache and the stack's cap allow: with fewer, requests queued for a slot "
                      f"past the SLA in the simulation ({held}; {at_max})",
    }[fit.limits["seq_limit"]]


def binding_text(model: LlmModelSpec, chosen: LlmCandidate) -> str:
    fit, load = chosen.fit, _load_text(model)
    below = _below_text(model, fit)
    texts = {
        "availability": f"availability ({fit.replicas} replicas for {model.sla.availability:g}%; the peak {load} "
                        f"{below or 'would be served by fewer'})",
        "ttft": f"TTFT (the peak is {load}; {below})",
        "tpot": f"TPOT (the peak is {load}; {below})",
        "memory": f"memory (the KV cache holds {fit.max_num_seqs} sequences per replica; the peak is {load})",
        "max_num_seqs cap": f"the stack's max_num_seqs cap ({fit.max_num_seqs} per replica; the peak is {load})",
        "overrides.max_num_seqs": f"overrides.max_num_seqs ({fit.max_num_seqs} per replica; the peak is {load})",
        "overrides.replicas": f"replicas pinned to {fit.replicas} (overrides.replicas)",
        "single replica": "one replica (the stack's replicas.singleReplica)",
    }
    return texts[fit.binding] + (f"; WARNING: {fit.shortfall}" if fit.shortfall else "")


def _below_text(model: LlmModelSpec, fit: Fit) -> str:
    """What the simulation found one replica fewer: why the count is not lower."""
    below = fit.limits.get("below")
    if below is None:
        return ""
    if below.result is None:
        return f"{below.replicas} replica(s) cannot keep up with it"
    sim, sla = below.result, model.sla
    runs = f"with {below.replicas} replica(s) ({sim.simulated_requests:,} simulated requests) the p99"
    if below.miss == "ttft":
        return f"{runs} TTFT is {miss_phrase(sim.ttft_p99_ms, sim.ttft_p99_high_ms, sla.p99_ttft_ms)}"
    if below.miss == "tpot":
        return f"{runs} TPOT is {miss_phrase(sim.tpot_p99_ms, sim.tpot_p99_high_ms, sla.p99_tpot_ms, ',.1f')}"
    return f"{below.replicas} replica(s) would already meet the SLA in simulation"


def _load_text(model: LlmModelSpec) -> str:
    sla = model.sla
    if sla.peak_concurrent_sequences is not None:
        return f"{sla.peak_concurrent_sequences:,} sequences"
    if sla.peak_output_tokens_per_s is not None:
        return f"{sla.peak_output_tokens_per_s:,g} output tokens/s"
    return f"{sla.peak_requests_per_s:,g} requests/s"


def _multi_node_note(rejection: Rejection, chosen: LlmCandidate, single_node: bool) -> str:
    """Why a type whose one node is too small was not split over several: one node of another type holds it."""
    if not single_node or rejection.stage not in (MEMORY, CONTEXT):
        return ""
    return (f"; pipeline parallelism across nodes is used only when no allowed single node serves the model, "
            f"and {chosen.instance.name} does")


def architecture_decision(model: LlmModelSpec, chosen: LlmCandidate, found: dict[str, list[Outcome]]) -> Decision | None:
    """What a MoE, MLA or sliding-window architecture changes in the plan; None for a plain dense model."""
    shape = chosen.sized.shape
    parts = []
    if shape.is_moe:
        total, active = model_params(model), shape.params(active=True)
        shared = " and a shared expert" if shape.shared_expert_intermediate else ""
        parts.append(f"mixture of experts: GPU memory holds every expert ({format_param_count(total)} parameters, "
                     f"{llm_weights_gib(model):,.1f} GiB), but a token runs {shape.experts_per_token} of "
                     f"{shape.experts} routed experts{shared}: {format_param_count(active)} active parameters, which "
                     f"prefill compute and each decode step's weight reads count")
        parts.append(_expert_parallel_text(chosen, found))
    if shape.is_mla:
        mla = shape.kv_lora_rank + shape.qk_rope_head_dim
        dense = 2 * shape.heads * shape.qk_head_dim
        parts.append(f"MLA attention: the KV cache keeps one latent vector per token and layer, kv_lora_rank "
                     f"{shape.kv_lora_rank} + qk_rope_head_dim {shape.qk_rope_head_dim} = {mla} elements "
                     f"({shape.kv_bytes_per_token() / 1024:,.1f} KiB per token), whole on every GPU, instead of K and "
                     f"V of {shape.heads} heads ({dense:,} elements per layer)")
    if shape.sliding_window:
        parts.append(f"sliding window: {shape.sliding_window_layers} of {shape.layers} layers attend to, and keep "
                     f"in the KV cache, at most {shape.sliding_window:,} tokens")
    if not parts:
        return None
    kinds = [k for k, on in (("MoE", shape.is_moe), ("MLA", shape.is_mla), ("sliding window", bool(shape.sliding_window))) if on]
    return Decision(choice=f"{' + '.join(kinds)} architecture ({model.resolved_architecture().origin})",
                    reason="; ".join(p for p in parts if p))


def _expert_parallel_text(chosen: LlmCandidate, found: dict[str, list[Outcome]]) -> str:
    if chosen.tp * chosen.pp == 1:
        return "one GPU holds every expert, so expert parallelism does not apply"
    other = next((o for o in found[chosen.instance.name] if _same_layout(o, chosen)), None)
    ways = ("dealt out whole over the GPUs (--enable-expert-parallel)", "split over the GPUs (tensor parallel)")
    mine, theirs = ways if chosen.expert_parallel else ways[::-1]
    text = f"experts {mine}: {chosen.usd_per_hour:.2f} USD/h, {figures(chosen.fit)}"
    if isinstance(other, LlmCandidate):
        return f"{text}; {theirs} instead: {other.usd_per_hour:.2f} USD/h, {figures(other.fit)}"
    if isinstance(other, Rejection):
        return f"{text}; {theirs} instead: {other.reason}"
    return f"{text}; {theirs} was not timed (its floor alone costs more)" if other else text


def _same_layout(outcome: Outcome, chosen: LlmCandidate) -> bool:
    label = outcome.option if isinstance(outcome, Rejection) else outcome.label
    other = f"{chosen.instance.name} tp={chosen.tp} pp={chosen.pp}" + ("" if chosen.expert_parallel else " ep")
    return label == other


def override_problem(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue, index: int,
                     allowed: tuple[InstanceType, ...]) -> Issue | None:
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
    most = max((i.gpus for i in allowed), default=0)
    if most and tp > most:
        return Issue("", 0, 0, path, f"{model.name}: tensor_parallel_size {tp} needs {tp} GPUs in one node; the "
                     f"allowed instance types have at most {most}", "lower it, or allow a family with larger nodes")
    return None
