"""One classic model's TritonModelPlan, from its spec, its sizing and the server it was packed onto."""

from __future__ import annotations

from ..errors import Issue
from ..spec.models import ClassicModelSpec
from .packing import ClassicPlacement, PackedServer
from .scheduling import scheduling
from .tensors import tensors
from .triton_policy import BACKENDS, check_budget, triton_decision
from .types import Decision, TritonModelPlan, Warning_

def _cache(model: ClassicModelSpec, server: PackedServer, warnings: list[Warning_]) -> bool:
    """Cache deterministic models unless opted out, and only when the server has a cache to use. Never a
    streaming or stateful model: Triton's cache serves neither (the spec refuses asking for it)."""
    if model.streaming or model.stateful is not None:
        return False
    wanted = model.overrides.response_cache if model.overrides.response_cache is not None else model.deterministic
    if wanted and server.cache_size_bytes == 0:
        warnings.append(Warning_(model=model.name, message="response cache wanted but the node has no spare RAM "
                                 "for one; choose a larger instance size to enable it"))
        return False
    return bool(wanted)


def _warn(model: ClassicModelSpec, assumed: tuple[str, ...], warnings: list[Warning_]) -> None:
    if model.framework == "python" and not model.handles_cancellation:
        warnings.append(Warning_(model=model.name, message="python backend: execute() must check "
                                 "request.is_cancelled(): REJECT drops requests still queued past the timeout, but "
                                 "a request already in execute() runs to the end even after its client gave up "
                                 "(cancelled it); set handles_cancellation: true once it does"))
    if assumed:
        warnings.append(Warning_(model=model.name, message="no measured profile applies, assuming " + ", ".join(assumed)
                                 + "; measure it: `modelfleet profile --stack STACK --url URL` on the GPU "
                                 "endpoint writes profile.* (or perf_analyzer's figures by hand)"))


def _warn_overloaded(model: ClassicModelSpec, demand: float, server: PackedServer, warnings: list[Warning_]) -> None:
    """Only a single-replica environment (dev) caps replicas below the load; say how much of the peak the
    server can then carry, as the LLM path does."""
    if demand > server.replicas:
        served = model.sla.peak_rps * server.replicas / demand
        warnings.append(Warning_(model=model.name, message=(
            f"single-replica environment: {server.replicas} replica(s) of {server.name} serve about "
            f"{served:.3g} of the {model.sla.peak_rps:g} peak req/s (the load needs {demand:.3g} GPUs of compute); "
            "requests beyond that queue and are rejected at the queue timeout")))


def triton_model_plan(model: ClassicModelSpec, index: int, server: PackedServer, placement: ClassicPlacement,
                      node_group: str, issues: list[Issue], warnings: list[Warning_],
                      pipeline_p99: str | None = None, step: Decision | None = None) -> TritonModelPlan:
    """``model`` as served (with its pipelines' load and p99 shares, explained by ``step``); ``pipeline_p99``:
    the path of the pipeline p99 its budget comes from, where that binds (a budget problem is located there)."""
    sizing = placement.sizings[model.name]
    problem = check_budget(model, sizing, index)
    if problem is not None:
        issues.append(problem if pipeline_p99 is None else Issue(
            "", 0, 0, pipeline_p99, f"{problem.message} (its share of the pipeline's p99)",
            "raise the pipeline's p99, or measure the steps' profile.compute_ms"))
    fields, decisions = scheduling(model, sizing, index, issues)
    # The queue derivation's decision, except for the sequence batcher, which has no queue policy to explain.
    queueing = () if model.stateful is not None else (triton_decision(model, sizing),)
    _warn(model, sizing.assumed, warnings)
    _warn_overloaded(model, sizing.gpu_demand, server, warnings)
    backend, platform = BACKENDS[model.framework]
    capacity = placement.instance.gpu_memory_gib
    return TritonModelPlan(
        name=model.name, type=model.type, team=model.team, server=server.name, node_group=node_group,
        instance_type=placement.instance.name, replicas=server.replicas, gpus_per_replica=1,
        gpu_share=round(max(sizing.gpu_memory_gib / capacity, sizing.gpu_demand / max(server.replicas, 1)), 4),
        weights_gib=round(sizing.weights_gib, 4), gpu_memory_gib=round(sizing.gpu_memory_gib, 4),
        backend=backend, platform=platform, artifact=model.artifact, max_batch_size=sizing.max_batch_size,
        instance_count=sizing.instance_count, queue_timeout_us=fields.pop("queue_timeout_us", sizing.queue_timeout_us),
        max_queue_delay_us=sizing.max_queue_delay_us, max_queue_size=sizing.max_queue_size,
        response_cache=_cache(model, server, warnings), versions=model.versions,
        inputs=tensors(model.inputs), outputs=tensors(model.outputs), peak_rps=model.sla.peak_rps,
        p99_latency_ms=model.sla.p99_latency_ms, rps_per_instance=round(sizing.rps_per_instance, 2),
        compute_ms=sizing.compute_ms, measured=sizing.measured, speed_basis=sizing.basis,
        bound_ms=None if sizing.bound is None else round(sizing.bound.ms, 4), decisions=(*queueing, *decisions, *((step,) if step else ())),
        **fields,
    )
