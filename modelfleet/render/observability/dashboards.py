"""Dashboards as data: what each panel shows and asks Prometheus, decided from the plan (pure, no Grafana).

Three kinds: one per Triton server (per model: request rate and rejections, p99 against its SLA, queue depth
against its bound, response-cache hit rate, error-budget burn, batch reached against the compiled maximum; the
server's GPU shares, replicas, its GPUs), one per vLLM model (TTFT and TPOT against the SLA, tokens/s, running and
waiting sequences, KV cache, prefix-cache hits, its GPUs), and the fleet overview (SLA attainment, GPUs, monthly
cost from the plan, the GPUs of each node group). The GPU rows are gpu_panels.py's, from the DCGM exporter.

Every query comes from slo_queries.py, the alerts' own arithmetic. The Grafana JSON is built from this
description by an edge adapter (modelfleet.grafana, with grafana-foundation-sdk), so the compiler needs no
dashboard library; every query here is checked by promtool and, end to end, against a real Prometheus.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...cost.fleet import FleetCost
from ...plan.names import CLUSTER, stable_name
from ...plan.types import AbSplitPlan, FleetPlan, TritonModelPlan, TritonServerPlan, VllmModelPlan
from ...spec.environment import OTHER_CALLER
from . import slo_queries as q
from .alerts import QUEUE_NEAR
from .gpu_panels import node_group_row, workload_gpu_row
from .panels import Dashboard, Panel, Query, Row
from .thresholds import queue_bound, triton_cached

RATE = "5m"  # rate window of the panels: 20 scrapes at the ServiceMonitors' 15 s interval
FOLDER = "modelfleet"


def dashboard_uid(environment: str, name: str) -> str:
    return stable_name("mf", f"{environment}-{name}", limit=40)


# ---------------------------------------------------------------------------------------------- Triton
@dataclass(frozen=True)
class Served:
    """What a Triton server's dashboard shows of one model, pipeline (its ensemble) or LLM (vLLM backend)."""

    name: str
    p99_ms: float
    availability: float
    decoupled: bool = False
    cached: bool = False
    bound: int = 0
    max_batch_size: int = 0  # the compiled one; 0: no batch panel (an ensemble, the vLLM backend)
    ab_split: AbSplitPlan | None = None

    @classmethod
    def of(cls, model: TritonModelPlan | VllmModelPlan) -> Served:
        if isinstance(model, VllmModelPlan):
            return cls(model.name, model.p99_ttft_ms, model.availability, decoupled=True)
        return cls(model.name, model.p99_latency_ms, model.availability, model.decoupled, triton_cached(model),
                   queue_bound(model), model.max_batch_size, model.ab_split)


def _triton_model_row(plan: FleetPlan, server: str, model: Served) -> Row:
    target = q.Target(plan.namespace, server, model.name)
    p99 = q.triton_first_response_p99_ms(target, RATE) if model.decoupled else q.triton_p99_ms(target, model.cached)
    what = "first response" if model.decoupled else "request latency"
    panels = [
        Panel("Requests and rejections", "timeseries", "Answered requests (cache hits included) and requests "
              "rejected by the queue policy (REJECTED: 503), per second.",
              (Query(q.triton_request_rate(target, RATE), "answered"),
               Query(q.triton_rejected_rate(target, RATE), "rejected")), "reqps"),
        Panel("p99 latency vs SLA", "timeseries", f"The slowest pod's p99 {what} (Triton's sliding minute); the "
              f"line is the SLA's {model.p99_ms:g} ms.", (Query(p99, "p99"),), "ms", model.p99_ms),
        Panel("Error budget burn rate", "timeseries", f"Failures over the budget of a {model.availability:g}% SLA: "
              "1 spends it exactly over 30 days; the fast-burn page is at 14.4.",
              (Query(q.burn_rate(q.triton_error_ratio(target, RATE), model.availability), "burn rate"),), "short", 14.4),
        Panel("Queue depth", "timeseries", "Requests waiting in the busiest pod's queue" + (
            f"; the line is {QUEUE_NEAR:.0%} of the bound ({model.bound:,}), where TritonQueueNearBound fires."
            if model.bound else "."), (Query(q.triton_queue_depth(target), "pending"),), "short",
            QUEUE_NEAR * model.bound if model.bound else None),
    ]
    if model.cached:
        panels.append(Panel("Response cache hit rate", "timeseries", "Share of requests answered from the cache.",
                            (Query(q.triton_cache_hit_ratio(target, RATE), "hit rate"),), "percentunit"))
    if model.max_batch_size > 1:
        panels.append(Panel("Batch size reached vs compiled", "timeseries", "Requests per execution (the batch the "
                            "dynamic batcher formed, on average); the line is the compiled max_batch_size "
                            f"({model.max_batch_size}). Far below it at peak, the batching window or the packing "
                            "premise is wrong.", (Query(q.triton_batch_size(target, RATE), "batch"),), "short",
                            float(model.max_batch_size)))
    return Row(model.name, tuple(panels))


def _ab_row(plan: FleetPlan, server: str, model: Served) -> Row:
    """The two sides of a held A/B split, side by side: Triton labels every series with its version."""
    split = model.ab_split
    assert split is not None
    sides = [(str(v), q.Target(plan.namespace, server, model.name, version=str(v)))
             for v in (split.control, split.candidate)]
    return Row(f"{model.name}: A/B, version {split.control} vs {split.candidate} ({split.candidate_share:.0%})", (
        Panel("Requests per version", "timeseries", f"Answered requests per second of each version; the split sends "
              f"{split.candidate_share:.0%} of the requests naming no version to {split.candidate}.",
              tuple(Query(q.triton_request_rate(t, RATE), f"v{v}") for v, t in sides), "reqps", width=6),
        Panel("Error ratio per version", "timeseries", "Failed over all requests, per version.",
              tuple(Query(q.triton_error_ratio(t, RATE), f"v{v}") for v, t in sides), "percentunit", width=6),
        Panel("Mean latency per version", "timeseries", f"Mean request time inside Triton; the line is the SLA's "
              f"p99 {model.p99_ms:g} ms.", tuple(Query(q.triton_mean_latency_ms(t, RATE), f"v{v}") for v, t in sides),
              "ms", model.p99_ms, width=6),
        Panel("Batch size per version", "timeseries", "Requests per execution, per version.",
              tuple(Query(q.triton_batch_size(t, RATE), f"v{v}") for v, t in sides), "short",
              float(model.max_batch_size) or None, width=6),
    ))


def _gpu_share_table(plan: FleetPlan, server: TritonServerPlan) -> Panel:
    lines = ["| model | GPU share | GPU memory (GiB) | instances | device |", "|---|---:|---:|---:|---|"]
    for name in server.models:
        model = plan.model(name)
        if isinstance(model, TritonModelPlan):
            lines.append(f"| {name} | {model.gpu_share:.0%} | {model.gpu_memory_gib:g} | {model.instance_count} | "
                         f"{model.device} |")
    note = (f"\n\nFrom the plan: {server.replicas} replica(s) ({server.min_replicas} to {server.max_replicas}) of "
            f"{server.gpus_per_replica} GPU on {server.instance_type}; the GPU's compute is "
            f"{server.gpu_compute_used:.0%} used at peak.")
    return Panel("GPU share (plan)", "text", "Each model's share of a replica's GPU (memory or compute, larger).",
                 text="\n".join(lines) + note, width=12)


def _workload_row(plan: FleetPlan, name: str, groups: bool) -> Row:
    pods = q.workload_pods(name, groups)
    return Row("Replicas", (
        Panel("Pods not ready", "timeseries", "Pods whose Ready condition is false or unknown (kube-state-metrics).",
              (Query(q.pods_not_ready(plan.namespace, pods), "not ready"),), "short"),
        Panel("GPUs requested", "timeseries", "GPUs the workload's pods request now (kube-state-metrics).",
              (Query(q.gpus_requested(plan.namespace, pods), "GPUs"),), "short"),
    ))


def _callers_row(plan: FleetPlan, server: str) -> Row:
    """Requests per declared caller, as the proxy in front of the server counts them (render/k8s/callers.py)."""
    target = q.Target(plan.namespace, server)
    what = (f"Requests per second by their x-modelfleet-caller header ({', '.join(plan.callers)}; "
            f"{OTHER_CALLER!r}: any other or none)")
    return Row("Callers", (
        Panel("HTTP requests by caller", "timeseries", f"{what}, over HTTP. A caller far above its peers, or its "
              "own history, is where duplicate traffic comes from.",
              (Query(q.caller_request_rate(target, RATE, "http"), "{{caller}}"),), "reqps"),
        Panel("gRPC requests by caller", "timeseries", f"{what}, over gRPC (one per unary call or stream).",
              (Query(q.caller_request_rate(target, RATE, "grpc"), "{{caller}}"),), "reqps"),
        Panel("HTTP 5xx by caller", "timeseries", "HTTP requests answered with a server error (503: rejected by "
              "the queue policy), per second, by caller.",
              (Query(q.caller_server_error_rate(target, RATE), "{{caller}}"),), "reqps"),
    ))


def triton_server_dashboard(plan: FleetPlan, server: TritonServerPlan) -> Dashboard:
    served = [Served.of(plan.model(name)) for name in server.models]
    served += [Served(p.name, p.p99_latency_ms, p.availability) for p in plan.pipelines if p.server == server.name]
    # the series know it by its cluster name (a former name where the stack keeps it); the title says the plan's
    rows = [_triton_model_row(plan, server.kube_name, s) for s in served]
    rows += [_ab_row(plan, server.kube_name, s) for s in served if s.ab_split is not None]
    rows += [_callers_row(plan, server.kube_name)] if plan.callers else []
    rows += [Row("Server", (_gpu_share_table(plan, server),)), _workload_row(plan, server.kube_name, False)]
    rows += [row for row in (workload_gpu_row(plan, server, server.kube_name, False),) if row is not None]
    return Dashboard(dashboard_uid(plan.environment, server.name), f"modelfleet {plan.environment}: Triton {server.name}",
                     server.kube_name, ("modelfleet", plan.environment, "triton"), tuple(rows))


# ---------------------------------------------------------------------------------------------- vLLM
def vllm_model_dashboard(plan: FleetPlan, model: VllmModelPlan) -> Dashboard:
    target = q.Target(plan.namespace, model.name, model.name, "model_name")
    latency = [Panel("TTFT p99 vs SLA", "timeseries", f"Time to first token, p99 over all replicas; the line is "
                     f"sla.p99_ttft_ms = {model.p99_ttft_ms:g} ms.", (Query(q.vllm_ttft_p99_ms(target, RATE), "p99"),),
                     "ms", model.p99_ttft_ms)]
    tpot = "" if model.p99_tpot_ms is None else f"; the line is sla.p99_tpot_ms = {model.p99_tpot_ms:g} ms"
    latency.append(Panel("TPOT p99 vs SLA", "timeseries", f"Time per output token (per request), p99{tpot}.",
                         (Query(q.vllm_tpot_p99_ms(target, RATE), "p99"),), "ms", model.p99_tpot_ms))
    latency.append(Panel("Error budget burn rate", "timeseries", f"Failures over the budget of a "
                         f"{model.availability:g}% SLA; the fast-burn page is at 14.4.",
                         (Query(q.burn_rate(q.vllm_error_ratio(target, RATE), model.availability), "burn rate"),),
                         "short", 14.4))
    load = (
        Panel("Tokens per second", "timeseries", "Generated tokens per second, all replicas.",
              (Query(q.vllm_tokens_per_s(target, RATE), "tokens/s"),), "short"),
        Panel("Running and waiting sequences", "timeseries", f"The busiest replica's batch (--max-num-seqs "
              f"{model.max_num_seqs}) and the requests waiting for it.",
              (Query(q.vllm_running(target), "running"), Query(q.vllm_waiting(target), "waiting")), "short",
              float(model.max_num_seqs)),
        Panel("KV cache usage", "timeseries", "The fullest replica's KV cache; VllmKvCacheNearFull above 90%.",
              (Query(q.vllm_kv_cache_usage(target), "used"),), "percentunit", 0.9),
        Panel("Prefix cache hit rate", "timeseries", "Share of prompt tokens found in the prefix cache.",
              (Query(q.vllm_prefix_cache_hit_ratio(target, RATE), "hit rate"),), "percentunit"),
    )
    groups = model.nodes_per_replica > 1
    gpus = workload_gpu_row(plan, model, model.name, groups)
    rows = (Row("SLA", tuple(latency)), Row("Load", load), _workload_row(plan, model.name, groups),
            *((gpus,) if gpus is not None else ()))
    return Dashboard(dashboard_uid(plan.environment, model.name), f"modelfleet {plan.environment}: vLLM {model.name}",
                     model.name, ("modelfleet", plan.environment, "vllm"), rows)


# ---------------------------------------------------------------------------------------------- the fleet
def _error_ratio(plan: FleetPlan, name: str, window: str) -> tuple[str, float]:
    """A model's (or pipeline's) error ratio over ``window``, and its availability target."""
    if name in {p.name for p in plan.pipelines}:
        pipeline = plan.pipeline(name)
        job = next(s.kube_name for s in plan.triton_servers if s.name == pipeline.server)
        return q.triton_error_ratio(q.Target(plan.namespace, job, name), window), pipeline.availability
    model = plan.model(name)
    if isinstance(model, VllmModelPlan):
        return q.vllm_error_ratio(q.Target(plan.namespace, name, name, "model_name"), window), model.availability
    server = next(s.kube_name for s in plan.triton_servers if name in s.models)
    return q.triton_error_ratio(q.Target(plan.namespace, server, name), window), model.availability


def _attainment(plan: FleetPlan) -> Row:
    names = sorted([m.name for m in plan.models] + [p.name for p in plan.pipelines])
    ratios = {name: _error_ratio(plan, name, q.SLO_PERIOD) for name in names}
    return Row("SLA attainment (30 days)", (
        Panel("Availability", "stat", "Requests answered over the last 30 days (failures as the alerts count them).",
              tuple(Query(q.availability_ratio(ratio), name) for name, (ratio, _) in ratios.items()),
              "percentunit", width=12),
        Panel("Error budget left", "stat", "The share of each SLA's 30-day error budget not yet spent; below 0 the "
              "SLA is missed.", tuple(Query(f"(1 - {ratio} / {q.error_budget(target):g})", name)
                                     for name, (ratio, target) in ratios.items()), "percentunit", 0.0, True, width=12),
    ))


def _plan_table(plan: FleetPlan, cost: FleetCost) -> Panel:
    lines = ["| model | engine | SLA availability | GPUs (min / desired / max) | monthly USD (desired) |",
             "|---|---|---:|---:|---:|"]
    for item in sorted(cost.models, key=lambda m: m.name):
        model = plan.model(item.name)
        usd = "unknown" if item.monthly_usd is None else f"{item.monthly_usd.desired:,.2f}"
        engine = "vLLM" if isinstance(model, VllmModelPlan) else "Triton"
        lines.append(f"| {item.name} | {engine} | {model.availability:g}% | {' / '.join(map(str, item.gpus))} | {usd} |")
    total = cost.monthly_usd
    summary = "unknown (a price is missing)" if total is None else (
        f"{total.desired:,.2f} USD at desired replicas ({total.min:,.2f} at min, {total.max:,.2f} at max)")
    text = "\n".join(lines) + f"\n\nFleet per month: {summary}; prices as of {cost.prices_as_of}."
    return Panel("GPUs and monthly cost (plan)", "text", "What the plan decided and what it costs (modelfleet cost).",
                 text=text, width=16)


def fleet_dashboard(plan: FleetPlan, cost: FleetCost) -> Dashboard:
    gpus = Panel("GPUs requested", "timeseries", "GPUs the fleet's pods request now (kube-state-metrics).",
                 (Query(q.gpus_requested(plan.namespace, ".+"), "GPUs"),), "short", width=8)
    by_group = node_group_row(plan)
    rows = (_attainment(plan), Row("GPUs and cost", (_plan_table(plan, cost), gpus)),
            *((by_group,) if by_group is not None else ()))
    return Dashboard(dashboard_uid(plan.environment, "fleet"), f"modelfleet {plan.environment}: fleet overview",
                     CLUSTER, ("modelfleet", plan.environment), rows)
