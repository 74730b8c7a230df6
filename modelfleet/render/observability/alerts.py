"""Alerting rules from the SLA: one rule group per workload (a Triton server, a vLLM model), as the
prometheus-operator's PrometheusRule applies it and as a plain rules file (``promtool check rules``).

What fires, per model (catalogue.py names them; docs/runbooks/alerts.md says what to do):

- the error budget burning fast (1 h and 5 min above 14.4x: page) or steadily (6 h and 30 min above 6x:
  ticket), REJECTED counting against it (slo_queries.py has the arithmetic);
- p99 latency above the SLA for 10 minutes (Triton: request, or first response when streaming; vLLM: TTFT,
  and TPOT where the SLA has it);
- saturation: Triton's queue near the bound the compiler set, the response cache's hit rate at half its
  trailing day's, vLLM's batch full with requests waiting, its KV cache above 90%;

and per workload: the HPA pinned at its maximum, pods not ready for longer than a cold start may take, and on its
GPUs (gpu_alerts.py, from the DCGM exporter) memory near full and XID errors.

Every rule carries the labels Alertmanager routes on (``team``, ``model``, ``workload``, ``environment``,
``severity``) and a summary, a description naming the SLA figure it protects, and a runbook URL.
``scale`` divides every window and ``for`` (durations.py): the end-to-end test's test-sized evaluation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...plan.types import FleetPlan, PipelinePlan, TritonModelPlan, TritonServerPlan, VllmModelPlan
from . import slo_queries as q
from .catalogue import runbook_url
from .durations import scaled
from .gpu_alerts import gpu_rules
from .thresholds import pod_ready_budget_s, queue_bound, triton_cached

Rule = dict[str, Any]
CACHE_DROP = 0.5  # the hit rate at half of its trailing day's...
CACHE_FLOOR = 0.1  # ...where that day's was at least 10% (below it the cache saves too little to matter)
KV_CACHE_FULL = 0.9
QUEUE_NEAR = 0.8
# The batch the dynamic batcher reaches while the load is near its planned peak, as a share of the compiled
# max_batch_size: the plan's throughput (rps_per_instance, hence the GPUs packed and the queue timeout) assumes
# full batches at peak, so a quarter of one means the premise is wrong. "Near the peak": at least half of
# sla.peak_rps (below it, small batches are simply a quiet hour). Only for a max_batch_size of 4 or more.
BATCH_FAR_BELOW = 0.25
PEAK_SHARE = 0.5


class RuleContext:
    """What every rule of one workload shares: the plan, the scale, the docs' URL, the workload's labels."""

    def __init__(self, plan: FleetPlan, workload: str, teams: tuple[str, ...], scale: int, docs_url: str | None,
                 job: str | None = None):
        self.plan, self.workload, self.scale, self.docs_url = plan, workload, scale, docs_url
        # what the series know it by (its Service, HPA and pods): a Triton server's former name where the stack
        # keeps it; the rules' labels and text carry the plan's name
        self.job = job or workload
        self.teams = tuple(sorted(set(teams)))

    def window(self, text: str) -> str:
        return scaled(text, self.scale)

    def rule(self, name: str, expr: str, for_: str, labels: dict[str, str], summary: str, description: str) -> Rule:
        common = {"environment": self.plan.environment, "namespace": self.plan.namespace, "workload": self.workload}
        if "model" not in labels and len(self.teams) == 1:  # a model's alert routes to its own team only
            common["team"] = self.teams[0]
        elif "model" not in labels and self.teams:
            common["teams"] = ",".join(self.teams)  # a server shared by teams: match with team=~ or teams=~
        return {"alert": name, "expr": expr, "for": self.window(for_),
                "labels": dict(sorted({**common, **labels}.items())),
                "annotations": {"summary": summary, "description": description,
                                "runbook_url": runbook_url(name, self.docs_url)}}


def _labels(model: str, team: str | None, severity: str, slo: str) -> dict[str, str]:
    return {"model": model, "severity": severity, "slo": slo, **({"team": team} if team else {})}


# ---------------------------------------------------------------------------------------------- availability
def burn_rules(ctx: RuleContext, engine: str, model: str, team: str | None, availability: float,
               error_ratio: Callable[[str], str]) -> list[Rule]:
    """The fast (page) and slow (ticket) multi-window burn-rate alerts of one model."""
    rules = []
    budget = q.error_budget(availability)
    for (speed, long, short, factor), severity, for_ in ((q.FAST_BURN, "page", "2m"), (q.SLOW_BURN, "ticket", "15m")):
        expr = (f"{q.burn_rate(error_ratio(ctx.window(long)), availability)} > {factor:g} and "
                f"{q.burn_rate(error_ratio(ctx.window(short)), availability)} > {factor:g}")
        days = 30 / factor
        rules.append(ctx.rule(
            f"{engine}ErrorBudgetBurn{speed.title()}", expr, for_, _labels(model, team, severity, "availability"),
            f"{model}: error budget burning at {{{{ $value | humanize }}}}x ({long} and {short} above {factor:g}x)",
            f"{model}'s availability SLA is {availability:g}% (an error budget of {budget:.4g} of requests over "
            f"30 days). Over the last {long} and {short} it failed requests more than {factor:g} times "
            f"faster than that allows: the month's budget would be gone in {days:.3g} days. "
            + _failure_note(engine)))
    return rules


def _failure_note(engine: str) -> str:
    if engine == "Triton":
        return ("Failures: REJECTED (queue timeout or full queue: overload answered with 503), BACKEND, OTHER; "
                "CANCELED requests are not counted.")
    return ("Failures: requests finished with reason 'error' and admissions refused by a queue limit; aborted "
            "requests (the client left) are not counted.")


# ---------------------------------------------------------------------------------------------- Triton
def triton_model_rules(ctx: RuleContext, model: TritonModelPlan) -> list[Rule]:
    target = q.Target(ctx.plan.namespace, ctx.job, model.name)
    rules = burn_rules(ctx, "Triton", model.name, model.team, model.availability,
                       lambda w: q.triton_error_ratio(target, w))
    rules.append(_triton_latency(ctx, target, model.name, model.team, model.p99_latency_ms,
                                 cached=triton_cached(model), decoupled=model.decoupled))
    bound = queue_bound(model)
    if bound:
        rules.append(ctx.rule(
            "TritonQueueNearBound", f"{q.triton_queue_depth(target)} >= {QUEUE_NEAR * bound:g}", "5m",
            _labels(model.name, model.team, "ticket", "saturation"),
            f"{model.name}: {{{{ $value | humanize }}}} requests queued, near the bound of {bound:,}",
            f"A pod's queue for {model.name} has held at least {QUEUE_NEAR:.0%} of {bound:,} requests for 5 minutes: "
            f"{_bound_note(model, bound)}. Past it, requests are rejected (503) and spend the availability budget "
            f"of its {model.availability:g}% SLA; its p99 SLA is {model.p99_latency_ms:g} ms."))
    if model.response_cache:
        rules.append(_cache_drop(ctx, target, model))
    if model.max_batch_size * BATCH_FAR_BELOW >= 1 and model.sequence is None:
        rules.append(_batch_far_below(ctx, target, model))
    return rules


def _batch_far_below(ctx: RuleContext, target: q.Target, model: TritonModelPlan) -> Rule:
    window, floor, busy = ctx.window("30m"), BATCH_FAR_BELOW * model.max_batch_size, PEAK_SHARE * model.peak_rps
    return ctx.rule(
        "TritonBatchFarBelowCompiled", f"{q.triton_batch_size(target, window)} < {floor:g} and "
        f"{q.triton_request_rate(target, window)} >= {busy:g}", "30m",
        _labels(model.name, model.team, "ticket", "saturation"),
        f"{model.name}: batches of {{{{ $value | humanize }}}} at peak load, compiled for {model.max_batch_size}",
        f"For 30 minutes {model.name} has served at least {PEAK_SHARE:.0%} of sla.peak_rps = {model.peak_rps:g} req/s, "
        f"yet its batches averaged under {BATCH_FAR_BELOW:.0%} of the compiled max_batch_size of "
        f"{model.max_batch_size}. The plan's throughput ({model.rps_per_instance:g} req/s per instance), hence its "
        "GPU packing and queue timeout, assume full batches at peak: that premise is wrong here.")


def _bound_note(model: TritonModelPlan, bound: int) -> str:
    if model.max_queue_size and bound == model.max_queue_size:
        return f"the compiled max_queue_size is {bound:,}"
    return (f"its instances drain about {bound:,} requests within the compiled queue timeout of "
            f"{model.queue_timeout_us / 1000:g} ms, so a longer queue is answered by REJECT")


def _triton_latency(ctx: RuleContext, target: q.Target, name: str, team: str | None, p99_ms: float, cached: bool,
                    decoupled: bool) -> Rule:
    if decoupled:
        expr, what = q.triton_first_response_p99_ms(target, ctx.window("5m")), "time to first response"
    else:
        expr, what = q.triton_p99_ms(target, cached), "request latency"
    source = (" (from the sum of its stages' p99s: Triton omits the request summary of a model with the response "
              "cache)" if cached and not decoupled else "")
    return ctx.rule(
        "TritonLatencyP99AboveSla", f"{expr} > {p99_ms:g}", "10m", _labels(name, team, "page", "latency"),
        f"{name}: p99 {what} {{{{ $value | humanize }}}} ms, above its SLA of {p99_ms:g} ms",
        f"{name}'s p99 {what} has stayed above its SLA, sla.p99_latency_ms = {p99_ms:g} ms, for 10 minutes on "
        f"its slowest pod{source}.")


def _cache_drop(ctx: RuleContext, target: q.Target, model: TritonModelPlan) -> Rule:
    now = q.triton_cache_hit_ratio(target, ctx.window("1h"))
    trailing = q.triton_cache_hit_ratio(target, ctx.window("1d"))
    return ctx.rule(
        "TritonResponseCacheHitRateDrop", f"{now} < {CACHE_DROP:g} * {trailing} and {trailing} > {CACHE_FLOOR:g}",
        "30m", _labels(model.name, model.team, "ticket", "saturation"),
        f"{model.name}: response cache hit rate {{{{ $value | humanizePercentage }}}}, under half its day's",
        f"{model.name}'s response cache answers under {CACHE_DROP:.0%} of the share it answered over the last day. "
        f"Every miss is executed: the load on its GPUs rises towards sla.peak_rps = {model.peak_rps:g} req/s "
        f"without the cache's help, and its p99 SLA of {model.p99_latency_ms:g} ms with it.")


def pipeline_rules(ctx: RuleContext, pipeline: PipelinePlan) -> list[Rule]:
    """A pipeline is one Triton model (its ensemble): burn rates and p99 against its own SLA."""
    target = q.Target(ctx.plan.namespace, ctx.job, pipeline.name)
    return [*burn_rules(ctx, "Triton", pipeline.name, pipeline.team, pipeline.availability,
                        lambda w: q.triton_error_ratio(target, w)),
            _triton_latency(ctx, target, pipeline.name, pipeline.team, pipeline.p99_latency_ms, False, False)]


def triton_llm_rules(ctx: RuleContext, model: VllmModelPlan) -> list[Rule]:
    """An LLM on Triton's vLLM backend: Triton's counters, and its first response (decoupled) against TTFT."""
    target = q.Target(ctx.plan.namespace, ctx.job, model.name)
    return [*burn_rules(ctx, "Triton", model.name, model.team, model.availability,
                        lambda w: q.triton_error_ratio(target, w)),
            _triton_latency(ctx, target, model.name, model.team, model.p99_ttft_ms, False, True)]


# ---------------------------------------------------------------------------------------------- vLLM
def vllm_model_rules(ctx: RuleContext, model: VllmModelPlan) -> list[Rule]:
    target = q.Target(ctx.plan.namespace, ctx.job, model.name, "model_name")
    rules = burn_rules(ctx, "Vllm", model.name, model.team, model.availability, lambda w: q.vllm_error_ratio(target, w))
    latencies = [("VllmTtftP99AboveSla", "time to first token", "p99_ttft_ms", model.p99_ttft_ms, q.vllm_ttft_p99_ms)]
    if model.p99_tpot_ms is not None:
        latencies.append(("VllmTpotP99AboveSla", "time per output token", "p99_tpot_ms", model.p99_tpot_ms,
                          q.vllm_tpot_p99_ms))
    for name, what, field, target_ms, query in latencies:
        rules.append(ctx.rule(
            name, f"{query(target, ctx.window('5m'))} > {target_ms:g}", "10m",
            _labels(model.name, model.team, "page", "latency"),
            f"{model.name}: p99 {what} {{{{ $value | humanize }}}} ms, above its SLA of {target_ms:g} ms",
            f"{model.name}'s p99 {what} over 5-minute windows has stayed above sla.{field} = {target_ms:g} ms "
            "for 10 minutes (all replicas together)."))
    return rules + _vllm_saturation(ctx, target, model)


def _vllm_saturation(ctx: RuleContext, target: q.Target, model: VllmModelPlan) -> list[Rule]:
    full = max(1, int(QUEUE_NEAR * model.max_num_seqs + 0.999))
    return [
        ctx.rule("VllmQueueSaturated", f"{q.vllm_running(target)} >= {full} and {q.vllm_waiting(target)} > 0", "10m",
                 _labels(model.name, model.team, "ticket", "saturation"),
                 f"{model.name}: batch full ({{{{ $value }}}} of {model.max_num_seqs} sequences) with requests waiting",
                 f"A replica of {model.name} has run at least {full} of its {model.max_num_seqs} sequences "
                 f"(--max-num-seqs) with requests waiting for 10 minutes: waiting time adds to every TTFT "
                 f"(SLA {model.p99_ttft_ms:g} ms)."),
        ctx.rule("VllmKvCacheNearFull", f"{q.vllm_kv_cache_usage(target)} > {KV_CACHE_FULL:g}", "5m",
                 _labels(model.name, model.team, "ticket", "saturation"),
                 f"{model.name}: KV cache {{{{ $value | humanizePercentage }}}} full",
                 f"A replica of {model.name} has used over {KV_CACHE_FULL:.0%} of its KV cache "
                 f"({model.kv_cache_tokens:,} tokens, sized for sla.max_context_tokens = {model.max_model_len:,}) "
                 f"for 5 minutes: vLLM preempts sequences, which then recompute their prompts, and TTFT (SLA {model.p99_ttft_ms:g} ms) grows."),
    ]


# ---------------------------------------------------------------------------------------------- the workload
def workload_rules(ctx: RuleContext, engine: str, bounds: tuple[int, int], groups: bool, ready_budget_s: int,
                   what: str) -> list[Rule]:
    """HPA pinned at its maximum (where it has one), pods not ready longer than a cold start may take."""
    ns, low, high = ctx.plan.namespace, *bounds
    labels = {"severity": "ticket", "slo": "saturation"}
    rules = []
    if low < high:
        rules.append(ctx.rule(
            f"{engine}ReplicasAtMax", f"{q.hpa_at_max(ns, ctx.job)} == 1", "15m", labels,
            f"{ctx.workload}: at its maximum of {high} replicas for 15 minutes",
            f"{ctx.workload}'s autoscaler has run all {high} replicas it may for 15 minutes: the load is above what "
            f"the plan sized for {what} (the stack's maxScaleFactor sets the ceiling), and any more is queued, "
            "then rejected."))
    budget = ctx.window(f"{max(900, ready_budget_s)}s")
    rules.append(ctx.rule(
        f"{engine}PodsNotReady", f"({q.pods_not_ready(ns, q.workload_pods(ctx.job, groups))}) > 0",
        f"{max(900, ready_budget_s)}s", labels,
        f"{ctx.workload}: {{{{ $value }}}} pod(s) not ready for {budget}",
        f"Pods of {ctx.workload} have not been ready for {budget}, longer than a node, its image and a cold start "
        f"need: fewer replicas serve {what}, and the availability SLA's replicas (zones) are short."))
    return rules


# ---------------------------------------------------------------------------------------------- per workload
def triton_server_groups(plan: FleetPlan, server: TritonServerPlan, scale: int = 1,
                         docs_url: str | None = None) -> list[dict[str, Any]]:
    """The rule group of one Triton server: its models', its pipelines', its own."""
    models = [plan.model(n) for n in server.models]
    pipelines = [p for p in plan.pipelines if p.server == server.name]
    teams = tuple(t for t in [*(m.team for m in models), *(p.team for p in pipelines)] if t)
    ctx = RuleContext(plan, server.name, teams, scale, docs_url, server.kube_name)
    rules = [r for m in models for r in (triton_model_rules(ctx, m) if isinstance(m, TritonModelPlan)
                                         else triton_llm_rules(ctx, m))]
    rules += [r for p in pipelines for r in pipeline_rules(ctx, p)]
    rules += workload_rules(ctx, "Triton", (server.min_replicas, server.max_replicas), False,
                            pod_ready_budget_s(plan, server), "its models' peak load")
    rules += gpu_rules(ctx, "Triton", server, False)
    return [{"name": f"modelfleet-{server.name}", "rules": rules}]


def vllm_model_groups(plan: FleetPlan, model: VllmModelPlan, scale: int = 1,
                      docs_url: str | None = None) -> list[dict[str, Any]]:
    ctx = RuleContext(plan, model.name, (model.team,) if model.team else (), scale, docs_url)
    rules = vllm_model_rules(ctx, model) + workload_rules(
        ctx, "Vllm", (model.min_replicas, model.max_replicas), model.nodes_per_replica > 1,
        pod_ready_budget_s(plan, model), "its peak sequences") + gpu_rules(ctx, "Vllm", model, model.nodes_per_replica > 1)
    return [{"name": f"modelfleet-{model.name}", "rules": rules}]
