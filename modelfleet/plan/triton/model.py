"""One classic model's TritonModelPlan, from its spec, its sizing and the server it was packed onto."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from ...errors import Issue
from ...spec.models import ClassicModelSpec
from .scheduling import scheduling
from .tensors import tensors
from .policy import BACKENDS, ClassicSizing, check_budget, triton_decision
from ..types import AbSplitPlan, Decision, TritonModelPlan, Warning_
from .warmup import unwarmable, warmup_dims, warmup_samples


class Server(Protocol):
    """What a model's plan reads of the server it is on (a GPU PackedServer or a CpuServer)."""

    name: str
    replicas: int
    cache_size_bytes: int


@dataclass(frozen=True)
class Where:
    """Where a model's instances run: the instance type, its GPU memory (0 on a CPU node) and node group."""

    instance_type: str
    gpu_memory_gib: float
    node_group: str


def _cache(model: ClassicModelSpec, server: Server, warnings: list[Warning_]) -> bool:
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
    lacking = unwarmable(model)
    if lacking:
        warnings.append(Warning_(model=model.name, message=f"no warmup: string input {', '.join(lacking)} has no "
                                 "representative value the compiler can make (a failed warmup fails the load), so its "
                                 "first requests on a fresh pod pay for lazy initialisation; give a sample: "
                                 f"`warmup: {{inputs: {{{lacking[0]}: samples/{model.name}/{lacking[0]}}}}}` (a file "
                                 "beside models.yaml holding one representative value, e.g. an image)"))
    if assumed:
        warnings.append(Warning_(model=model.name, message="no measured profile applies, assuming " + ", ".join(assumed)
                                 + "; measure it: `modelfleet profile --stack STACK --url URL` on the GPU "
                                 "endpoint writes profile.* (or perf_analyzer's figures by hand)"))


def _warn_overloaded(model: ClassicModelSpec, demand: float, server: Server, warnings: list[Warning_],
                     unit: str) -> None:
    """Only a single-replica environment (dev) caps replicas below the load; say how much of the peak the
    server can then carry, as the LLM path does."""
    if demand > server.replicas:
        served = model.sla.peak_rps * server.replicas / demand
        warnings.append(Warning_(model=model.name, message=(
            f"single-replica environment: {server.replicas} replica(s) of {server.name} serve about "
            f"{served:.3g} of the {model.sla.peak_rps:g} peak req/s (the load needs {demand:.3g} {unit}); "
            "requests beyond that queue and are rejected at the queue timeout")))


def triton_model_plan(model: ClassicModelSpec, index: int, server: Server, sizing: ClassicSizing, where: Where,
                      issues: list[Issue], warnings: list[Warning_], pipeline_p99: str | None = None,
                      extra: tuple[Decision, ...] = (), **fields: Any) -> TritonModelPlan:
    """``model`` as served (with its pipelines' load and p99 shares, explained by ``extra``); ``pipeline_p99``:
    the path of the pipeline p99 its budget comes from, where that binds (a budget problem is located there);
    ``fields``: the plan's own fields for a KIND_CPU model (device, cpu_cores, gpu_placement_usd_per_hour)."""
    problem = check_budget(model, sizing, index)
    if problem is not None:
        issues.append(problem if pipeline_p99 is None else Issue(
            "", 0, 0, pipeline_p99, f"{problem.message} (its share of the pipeline's p99)",
            "raise the pipeline's p99, or measure the steps' profile.compute_ms"))
    scheduled, decisions = scheduling(model, sizing, index, issues)
    # The queue derivation's decision, except for the sequence batcher, which has no queue policy to explain.
    queueing = () if model.stateful is not None else (triton_decision(model, sizing),)
    _warn(model, sizing.assumed, warnings)
    on_cpu = where.gpu_memory_gib == 0
    _warn_overloaded(model, sizing.gpu_demand, server, warnings, "server pods" if on_cpu else "GPUs of compute")
    backend, platform = BACKENDS[model.framework]
    share = 0.0 if on_cpu else max(sizing.gpu_memory_gib / where.gpu_memory_gib, sizing.gpu_demand / max(server.replicas, 1))
    return TritonModelPlan(
        name=model.name, type=model.type, team=model.team, server=server.name, node_group=where.node_group,
        instance_type=where.instance_type, replicas=server.replicas, gpus_per_replica=0 if on_cpu else 1,
        gpu_share=round(share, 4), weights_gib=round(sizing.weights_gib, 4), gpu_memory_gib=round(sizing.gpu_memory_gib, 4),
        backend=backend, platform=platform, artifact=model.artifact, max_batch_size=sizing.max_batch_size,
        instance_count=sizing.instance_count, queue_timeout_us=scheduled.pop("queue_timeout_us", sizing.queue_timeout_us),
        max_queue_delay_us=sizing.max_queue_delay_us, max_queue_size=sizing.max_queue_size,
        response_cache=_cache(model, server, warnings),
        versions=(model.version.number,) if model.version else model.versions,
        version_sha256=model.version.sha256 if model.version else None,
        ab_split=None if model.ab_split is None else AbSplitPlan(
            control=model.ab_split.control, candidate=model.ab_split.candidate, candidate_share=model.ab_split.share), warmup_dims=warmup_dims(model),
        warmup_samples=warmup_samples(model),
        inputs=tensors(model.inputs), outputs=tensors(model.outputs), peak_rps=model.sla.peak_rps,
        p99_latency_ms=model.sla.p99_latency_ms, rps_per_instance=round(sizing.rps_per_instance, 2),
        compute_ms=sizing.compute_ms, measured=sizing.measured, speed_basis=sizing.basis,
        bound_ms=None if sizing.bound is None else round(sizing.bound.ms, 4),
        decisions=(*queueing, *decisions, *extra), availability=model.sla.availability, **scheduled, **fields,
    )
