"""The canary analysis of a workload: PromQL from each served model's own SLA, as an Argo Rollouts
AnalysisTemplate (pure data). Kept apart from the general SLO queries (alerts, dashboards) on purpose: these
select only the canary's pods, by the pod-template hash Argo Rollouts puts in their names.

Triton, per model on the server (``nv_inference_*``, labelled ``model`` and ``version``):

- error ratio: failures of every reason (REJECTED by the queue timeout included) over all requests, at most
  the SLA's error budget (100% - availability);
- p99 latency: Triton 2.51 and later publish per-stage latency quantiles (``--metrics-config
  summary_latencies=true``; its histograms cover decoupled models only): queue + compute input + infer +
  output p99, the worst canary pod's, at most the SLA's p99. A sum of per-stage p99s is not the end-to-end
  p99; it equals it when slow stages coincide (a request queued behind a slow batch), and is usually above it.
- a decoupled (streaming) model's SLA is its first response, which no stage summary measures (its compute
  stages last the whole stream): its p99 comes from ``nv_inference_first_response_histogram_ms``, the
  canary pods' buckets together. Triton exports that histogram from 2.52 on (the deployed 2.73 has it; the
  2.51 here does not) and only with ``--metrics-config=histogram_latencies=true``, which the plan sets on
  every server with a decoupled model (plan/serving/engine_args.py); the alerts read the same histogram
  (render/observability/slo_queries.py).

vLLM (``vllm:*``, checked against the real vLLM's /metrics in tests/engines/test_serve_llm.py):

- error ratio: requests finished with reason ``error`` (vLLM's 500s) over all finished ones;
- TTFT p99 from ``vllm:time_to_first_token_seconds``, at most the SLA's ``p99_ttft_ms``;
- TPOT p99 from ``vllm:request_time_per_output_token_seconds``, at most the plan's ``tpot_ms``: the SLA's
  ``p99_tpot_ms`` when it has one, else the TPOT the plan predicts with ``max_num_seqs`` sequences running
  (the slowest it lets a stream get; plan/compiler.py ``_tpot_gate``).

Every measurement must have data: an empty result or NaN (a canary that got no requests) fails it, as
missing evidence should. A metric failing twice (``FAILURE_LIMIT``) aborts the rollout.
"""

from __future__ import annotations

from typing import Any

from ..plan.types import FleetPlan, TritonModelPlan, TritonServerPlan, VllmModelPlan
from ..plan.names import analysis_name  # noqa: F401  (re-exported: rollouts name the template)

PROMETHEUS_ADDRESS = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"  # k8s/prerequisites' Prometheus
CANARY_HASH = "canary-hash"  # the AnalysisTemplate's argument: the canary ReplicaSet's pod-template hash
INTERVAL = "1m"
WINDOW = "2m"  # two intervals: eight samples at the ServiceMonitor's 15 s scrape
FAILURE_LIMIT = 1  # one bad minute is noise (a pod still warming its caches), two are a trend
TRITON_STAGES = ("queue", "compute_input", "compute_infer", "compute_output")
TRITON_FIRST_RESPONSE = "nv_inference_first_response_histogram_ms"  # milliseconds; decoupled models only
# The vLLM series the queries read (tests/engines/test_serve_llm.py finds each on the real server's /metrics).
VLLM_FINISHED = "vllm:request_success_total"
VLLM_TTFT = "vllm:time_to_first_token_seconds"
VLLM_TPOT = "vllm:request_time_per_output_token_seconds"
VLLM_SERIES = (VLLM_FINISHED, f"{VLLM_TTFT}_bucket", f"{VLLM_TPOT}_bucket")


def canary_selector(plan: FleetPlan, workload: str, model: str | None = None) -> str:
    """The canary pods' series: Argo Rollouts names them <workload>-<pod-template hash>-<suffix>."""
    labels = [f'namespace="{plan.namespace}"', f'pod=~"{workload}-{{{{args.{CANARY_HASH}}}}}-.*"']
    return ", ".join(labels + ([f'model="{model}"'] if model else []))


def _ratio(failed: str, total: str) -> str:
    return f"sum(rate({failed}[{WINDOW}])) / sum(rate({total}[{WINDOW}]))"


def triton_queries(model: TritonModelPlan, selector: str) -> list[tuple[str, str, str]]:
    """(metric name, PromQL, success condition) for one model on a Triton canary."""
    budget = round(1 - model.availability / 100, 6)
    errors = (f"sum(rate(nv_inference_request_failure{{{selector}}}[{WINDOW}])) / "
              f"(sum(rate(nv_inference_request_success{{{selector}}}[{WINDOW}])) + "
              f"sum(rate(nv_inference_request_failure{{{selector}}}[{WINDOW}])))")
    return [(f"{model.name}-error-ratio", errors, f"result[0] <= {budget:g}"), _triton_latency(model, selector)]


def _triton_latency(model: TritonModelPlan, selector: str) -> tuple[str, str, str]:
    """The p99 the SLA means: a decoupled model's first response, otherwise the request's stages summed."""
    if model.decoupled:
        latency = (f"histogram_quantile(0.99, sum by (le) (rate({TRITON_FIRST_RESPONSE}_bucket{{{selector}}}"
                   f"[{WINDOW}])))")
        return f"{model.name}-first-response-p99-ms", latency, f"result[0] <= {model.p99_latency_ms:g}"
    stages = " + ".join(f'nv_inference_{s}_summary_us{{{selector}, quantile="0.99"}}' for s in TRITON_STAGES)
    return f"{model.name}-p99-ms", f"max({stages}) / 1000", f"result[0] <= {model.p99_latency_ms:g}"


def vllm_queries(model: VllmModelPlan, selector: str) -> list[tuple[str, str, str]]:
    budget = round(1 - model.availability / 100, 6)
    finished = f"{VLLM_FINISHED}{{{selector}}}"
    errors = _ratio(f'{VLLM_FINISHED}{{{selector}, finished_reason="error"}}', finished)

    def p99(histogram: str) -> str:
        return f"histogram_quantile(0.99, sum by (le) (rate({histogram}_bucket{{{selector}}}[{WINDOW}]))) * 1000"

    return [(f"{model.name}-error-ratio", errors, f"result[0] <= {budget:g}"),
            (f"{model.name}-ttft-p99-ms", p99(VLLM_TTFT),
             f"result[0] <= {model.p99_ttft_ms:g}"),
            (f"{model.name}-tpot-p99-ms", p99(VLLM_TPOT),
             f"result[0] <= {model.tpot_ms:g}")]


def workload_queries(plan: FleetPlan, workload: TritonServerPlan | VllmModelPlan) -> list[tuple[str, str, str]]:
    if isinstance(workload, VllmModelPlan):
        return vllm_queries(workload, canary_selector(plan, workload.name))
    out = []
    for name in workload.models:
        model = plan.model(name)
        selector = canary_selector(plan, workload.kube_name, name)  # its pods carry the cluster's name
        out += triton_queries(model, selector) if isinstance(model, TritonModelPlan) else vllm_queries(model, selector)
    return out


def analysis_template(plan: FleetPlan, workload: TritonServerPlan | VllmModelPlan,
                      metadata: dict[str, Any]) -> dict[str, Any]:
    """The AnalysisTemplate the workload's Rollout runs in the background from its first step."""
    metrics = [{"name": name, "interval": INTERVAL, "initialDelay": INTERVAL, "failureLimit": FAILURE_LIMIT,
                "successCondition": condition,
                "provider": {"prometheus": {"address": PROMETHEUS_ADDRESS, "query": query}}}
               for name, query, condition in workload_queries(plan, workload)]
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "AnalysisTemplate", "metadata": metadata,
            "spec": {"args": [{"name": CANARY_HASH}], "metrics": metrics}}
