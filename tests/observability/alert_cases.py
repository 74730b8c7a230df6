"""One ``promtool test rules`` case per alert kind: synthetic series on which the generated rule must fire
(a bad series) and series on which it must stay silent (a good one, usually just short of the threshold).

The rules are the ones ``render`` writes for the example's prod stack (a model's copy where the example has no
such model: a streaming one, a TPOT SLA), at scale 1, with their annotations left out (promtool compares an
alert's annotations exactly, and they hold the firing value; ``check rules`` checks their templates).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modelfleet.plan.types import FleetPlan, TritonModelPlan, VllmModelPlan
from modelfleet.render.observability import rule_groups
from modelfleet.render.observability.alerts import RuleContext, triton_model_rules
from modelfleet.render.observability.durations import seconds
from modelfleet.render.observability.thresholds import queue_bound

SERVER, LLM, MULTI_NODE_LLM = "triton-g5-xlarge", "llama-3-1-8b-instruct", "llama-3-1-405b-instruct"
CACHED, UNCACHED = "resnet50-classifier", "image-classification"  # a model with the response cache; the pipeline


@dataclass(frozen=True)
class Case:
    alert: str
    variant: str
    groups: list[dict[str, Any]]  # the workload's rule groups
    labels: dict[str, str]  # of the rule under test (what a firing alert carries)
    bad: list[dict[str, str]]
    good: list[dict[str, str]]
    eval_minutes: int


def series(metric: str, labels: dict[str, str], values: str) -> dict[str, str]:
    text = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{metric}{{{text}}}", "values": values}


def _rule(groups: list[dict[str, Any]], alert: str, model: str | None) -> dict[str, Any]:
    return next(r for g in groups for r in g["rules"]
                if r["alert"] == alert and (model is None or r["labels"].get("model") == model))


def _case(groups, alert, variant, model, bad, good, minutes) -> Case:
    return Case(alert, variant, groups, _rule(groups, alert, model)["labels"], bad, good, minutes)


def _job(plan: FleetPlan) -> str:
    """The server's name in the series: its Service, HPA and pods (its former name where the stack keeps it)."""
    return plan.server(SERVER).kube_name


def _triton(plan: FleetPlan, model: str) -> dict[str, str]:
    job = _job(plan)
    return {"namespace": plan.namespace, "job": job, "model": model, "version": "1", "pod": f"{job}-7d9f8c6b5-x2x4z"}


def _vllm(plan: FleetPlan, name: str = LLM) -> dict[str, str]:
    return {"namespace": plan.namespace, "job": name, "model_name": name, "engine": "0", "pod": f"{name}-5c7b9d8f6-q8w2e"}


# ---------------------------------------------------------------------------------------------- availability
def triton_burn(plan: FleetPlan, groups) -> list[Case]:
    labels = _triton(plan, CACHED)  # availability 99.9: fast above 1.44% failed, slow above 0.6%

    def load(failed_per_min: int, minutes: int) -> list[dict[str, str]]:
        return [series("nv_inference_request_success", labels, f"0+1000x{minutes}"),
                series("nv_inference_request_failure", {**labels, "reason": "REJECTED"}, f"0+{failed_per_min}x{minutes}"),
                series("nv_inference_request_failure", {**labels, "reason": "CANCELED"}, f"0+500x{minutes}")]
    return [_case(groups, "TritonErrorBudgetBurnFast", "9% rejected vs 0.4%", CACHED, load(100, 90), load(4, 90), 75),
            _case(groups, "TritonErrorBudgetBurnSlow", "1% rejected vs 0.2%", CACHED, load(10, 440), load(2, 440), 420)]


def vllm_burn(plan: FleetPlan, groups) -> list[Case]:
    labels = _vllm(plan)  # availability 99.9: fast above 1.44% failed, slow above 0.6%

    def load(errors_per_min: int, minutes: int) -> list[dict[str, str]]:
        return [series("vllm:request_success_total", {**labels, "finished_reason": "stop"}, f"0+1000x{minutes}"),
                series("vllm:request_success_total", {**labels, "finished_reason": "error"}, f"0+{errors_per_min}x{minutes}"),
                series("vllm:request_success_total", {**labels, "finished_reason": "abort"}, f"0+500x{minutes}"),
                series("vllm:admission_rejections_total", {**labels, "reason": "max_num_queued_reqs"}, f"0+0x{minutes}")]
    return [_case(groups, "VllmErrorBudgetBurnFast", "9% errors vs 1%", LLM, load(100, 90), load(10, 90), 75),
            _case(groups, "VllmErrorBudgetBurnSlow", "1% errors vs 0.4%", LLM, load(10, 440), load(4, 440), 420)]


# ---------------------------------------------------------------------------------------------- latency
def triton_latency(plan: FleetPlan, groups) -> list[Case]:
    pipeline, cached = plan.pipeline(UNCACHED), plan.model(CACHED)
    request = _triton(plan, UNCACHED) | {"quantile": "0.99"}
    stages = _triton(plan, CACHED) | {"quantile": "0.99"}

    def split(total_ms: float) -> list[dict[str, str]]:
        parts = (0.6, 0.1, 0.2, 0.1)
        return [series(f"nv_inference_{stage}_summary_us", stages, f"{total_ms * 1000 * part:g}x30")
                for stage, part in zip(("queue", "compute_input", "compute_infer", "compute_output"), parts)]
    return [
        _case(groups, "TritonLatencyP99AboveSla", "request summary", UNCACHED,
              [series("nv_inference_request_summary_us", request, f"{pipeline.p99_latency_ms * 1300:g}x30")],
              [series("nv_inference_request_summary_us", request, f"{pipeline.p99_latency_ms * 700:g}x30")], 20),
        _case(groups, "TritonLatencyP99AboveSla", "stage summaries (response cache)", CACHED,
              split(cached.p99_latency_ms * 1.2), split(cached.p99_latency_ms * 0.8), 20),
        streaming_latency(plan),
    ]


def streaming_latency(plan: FleetPlan) -> Case:
    """A decoupled copy of the cached model: its SLA is the first response, from Triton's histogram."""
    model = plan.model(CACHED).model_copy(update={"decoupled": True})
    groups = [{"name": "streaming", "rules": triton_model_rules(RuleContext(plan, SERVER, (), 1, None, _job(plan)), model)}]
    labels = _triton(plan, CACHED)

    def observations(bucket: str) -> list[dict[str, str]]:
        return [series("nv_inference_first_response_histogram_ms_bucket", {**labels, "le": le},
                       "0+100x30" if float(le) >= float(bucket) else "0x30")
                for le in ("5", "10", "50", "100", "500", "+Inf")]
    bad, good = observations("500"), observations("10")  # the SLA is 20 ms
    return Case("TritonLatencyP99AboveSla", "first-response histogram (streaming)", groups,
                _rule(groups, "TritonLatencyP99AboveSla", CACHED)["labels"], bad, good, 20)


def vllm_latency(plan: FleetPlan) -> list[Case]:
    model: VllmModelPlan = plan.model(LLM).model_copy(update={"p99_tpot_ms": 50.0})
    groups = rule_groups(plan.model_copy(update={"models": tuple(model if m.name == LLM else m for m in plan.models)}), model)
    labels = _vllm(plan)

    def histogram(metric: str, above: float) -> list[dict[str, str]]:
        return [series(f"{metric}_bucket", {**labels, "le": le}, "0+100x30" if float(le) >= above else "0x30")
                for le in ("0.01", "0.025", "0.1", "0.5", "1", "2.5", "5", "+Inf")]
    ttft, tpot = "vllm:time_to_first_token_seconds", "vllm:request_time_per_output_token_seconds"
    return [_case(groups, "VllmTtftP99AboveSla", "TTFT histogram", LLM, histogram(ttft, 5), histogram(ttft, 1), 20),
            _case(groups, "VllmTpotP99AboveSla", "TPOT histogram (an SLA with p99_tpot_ms)", LLM,
                  histogram(tpot, 0.5), histogram(tpot, 0.025), 20)]


# ---------------------------------------------------------------------------------------------- saturation
def triton_saturation(plan: FleetPlan, groups) -> list[Case]:
    model: TritonModelPlan = plan.model(CACHED)
    pending, labels = "nv_inference_pending_request_count", _triton(plan, CACHED)
    bound = queue_bound(model)

    def cache(hits_then: int, hits_now: int) -> list[dict[str, str]]:  # 23 h at 50%, then 2 h at hits_now%
        return [series("nv_cache_num_hits_per_model", labels, f"0+50x1380 {50 * 1380 + hits_now}+{hits_now}x120"),
                series("nv_cache_num_misses_per_model", labels,
                       f"0+50x1380 {50 * 1380 + 100 - hits_now}+{100 - hits_now}x120")]
    full, busy = model.max_batch_size, model.peak_rps * 60  # requests per minute at the planned peak

    def batches(per_execution: int) -> list[dict[str, str]]:  # peak load for 70 minutes, per_execution per batch
        return [series("nv_inference_request_success", labels, f"0+{busy:g}x70"),
                series("nv_inference_count", labels, f"0+{busy:g}x70"),
                series("nv_inference_exec_count", labels, f"0+{busy / per_execution:g}x70")]
    return [
        _case(groups, "TritonBatchFarBelowCompiled", f"batches of 2 vs {full // 2} (compiled {full})", CACHED,
              batches(2), batches(full // 2), 65),
        _case(groups, "TritonQueueNearBound", f"{bound:,} queued vs half", CACHED,
              [series(pending, labels, f"{bound}x20")], [series(pending, labels, f"{bound // 2}x20")], 15),
        _case(groups, "TritonResponseCacheHitRateDrop", "hit rate 50% -> 10% vs steady", CACHED,
              cache(50, 10), cache(50, 45), 1500),
    ]


def vllm_saturation(plan: FleetPlan, groups) -> list[Case]:
    model: VllmModelPlan = plan.model(LLM)
    labels = _vllm(plan)

    def batch(waiting: int) -> list[dict[str, str]]:
        return [series("vllm:num_requests_running", labels, f"{model.max_num_seqs}x20"),
                series("vllm:num_requests_waiting", labels, f"{waiting}x20")]
    usage = "vllm:kv_cache_usage_perc"
    return [_case(groups, "VllmQueueSaturated", "full batch, 5 waiting vs none", LLM, batch(5), batch(0), 15),
            _case(groups, "VllmKvCacheNearFull", "95% vs 85%", LLM, [series(usage, labels, "0.95x20")],
                  [series(usage, labels, "0.85x20")], 15)]


def replicas(plan: FleetPlan, groups, workload: str, engine: str, low: int, high: int, pod: str) -> list[Case]:
    hpa = {"namespace": plan.namespace, "horizontalpodautoscaler": workload}
    at_max = [series("kube_horizontalpodautoscaler_status_current_replicas", hpa, f"{high}x30"),
              series("kube_horizontalpodautoscaler_spec_max_replicas", hpa, f"{high}x30")]
    below = [at_max[0] | {"values": f"{low}x30"}, at_max[1]]
    rule = _rule(groups, f"{engine}PodsNotReady", None)
    minutes = int(seconds(rule["for"]) // 60) + 10
    ready = {"namespace": plan.namespace, "pod": pod}
    other = {"namespace": plan.namespace, "pod": f"{workload}-extra-7d9f8c6b5-x2x4z"}  # another workload's pod

    def status(ready_now: bool) -> list[dict[str, str]]:
        return [series("kube_pod_status_ready", {**ready, "condition": "true"}, f"{int(ready_now)}x{minutes + 5}"),
                series("kube_pod_status_ready", {**ready, "condition": "false"}, f"{int(not ready_now)}x{minutes + 5}"),
                series("kube_pod_status_ready", {**other, "condition": "false"}, f"1x{minutes + 5}")]
    return [_case(groups, f"{engine}ReplicasAtMax", f"at {high} vs {low}", None, at_max, below, 25),
            _case(groups, f"{engine}PodsNotReady", f"{pod} not ready vs ready", None, status(False), status(True),
                  minutes)]


# ---------------------------------------------------------------------------------------------- GPUs (DCGM)
def gpu(plan: FleetPlan, groups, engine: str, pod: str, node_group: str, memory_mib: int) -> list[Case]:
    """The DCGM exporter's series of the GPU a pod holds (its labels, honoured by the ServiceMonitor), and of a GPU
    another workload's pod holds on the same node group: its XID error is not this workload's."""
    def labels(of: str, index: str) -> dict[str, str]:
        return {"gpu": index, "UUID": f"GPU-{index}", "Hostname": "ip-10-0-1-2", "modelName": "NVIDIA A10G",
                "namespace": plan.namespace, "pod": of, "container": "server", "node_group": node_group}
    mine, other = labels(pod, "0"), labels(f"{pod.split('-')[0]}-other-7d9f8c6b5-x2x4z", "1")

    def memory(used_share: float) -> list[dict[str, str]]:
        used = round(memory_mib * used_share)
        return [series("DCGM_FI_DEV_FB_USED", mine, f"{used}x20"),
                series("DCGM_FI_DEV_FB_FREE", mine, f"{memory_mib - used}x20")]

    def xid(code: int) -> list[dict[str, str]]:
        return [series("DCGM_FI_DEV_XID_ERRORS", mine, f"{code}x10"), series("DCGM_FI_DEV_XID_ERRORS", other, "79x10")]
    rule = _rule(groups, f"{engine}GpuMemoryNearFull", None)
    full = float(rule["expr"].rsplit(">", 1)[1])
    return [_case(groups, f"{engine}GpuMemoryNearFull", f"{(1 + full) / 2:.1%} used vs {full - 0.03:.0%}", None,
                  memory((1 + full) / 2), memory(full - 0.03), 15),
            _case(groups, f"{engine}GpuXidError", "XID 79 on its GPU vs only on another workload's", None,
                  xid(79), xid(0), 5)]


def all_cases(plan: FleetPlan) -> list[Case]:
    server, llm, lws = plan.server(SERVER), plan.model(LLM), plan.model(MULTI_NODE_LLM)
    triton, vllm, big = rule_groups(plan, server), rule_groups(plan, llm), rule_groups(plan, lws)
    return [*triton_burn(plan, triton), *triton_latency(plan, triton), *triton_saturation(plan, triton),
            *replicas(plan, triton, server.kube_name, "Triton", server.min_replicas, server.max_replicas,
                      f"{server.kube_name}-7d9f8c6b5-x2x4z"),
            *vllm_burn(plan, vllm), *vllm_latency(plan), *vllm_saturation(plan, vllm),
            *replicas(plan, vllm, LLM, "Vllm", llm.min_replicas, llm.max_replicas, f"{LLM}-5c7b9d8f6-q8w2e"),
            *replicas(plan, big, MULTI_NODE_LLM, "Vllm", lws.min_replicas, lws.max_replicas, f"{MULTI_NODE_LLM}-0-1"),
            *gpu(plan, triton, "Triton", f"{server.kube_name}-7d9f8c6b5-x2x4z", server.node_group, 22_888),
            *gpu(plan, vllm, "Vllm", f"{LLM}-5c7b9d8f6-q8w2e", llm.node_group, 46_068),
            *gpu(plan, big, "Vllm", f"{MULTI_NODE_LLM}-0-1", lws.node_group, 81_559)[1:]]
