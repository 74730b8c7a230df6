"""The SLO arithmetic in PromQL, once: what the alerts, the dashboards (and later the rollouts' analysis
templates) ask Prometheus about a model. Pure string building: no plan types, no I/O.

Every function takes a :class:`Target` (which series: a workload's scrape job in a namespace, one model) and,
where it averages, a window (a Prometheus duration such as ``5m``), and returns an expression whose result
has no labels (one number, or nothing when there is no data: a ratio of no traffic is NaN and compares
false, so no alert fires on silence).

Conventions, so that another consumer gets the same meaning:

- **Error ratio** = failed / (succeeded + failed) requests over the window.
  Triton: ``nv_inference_request_failure`` with reason REJECTED (the queue timeout or bound shed it: an
  overload is an outage the caller sees as a 503), BACKEND or OTHER; CANCELED is the caller's own doing and
  counts neither way. vLLM: ``vllm:request_success_total`` finished with reason ``error`` plus
  ``vllm:admission_rejections_total`` (a queue limit refused it), over those plus the ones finished normally
  (``stop``, ``length``, ``repetition``); ``abort`` (the client went away) counts neither way.
- **Burn rate** = error ratio / (1 - availability): 1 spends the error budget exactly over the SLO period.
  :data:`FAST_BURN` and :data:`SLOW_BURN` are the SRE workbook's multi-window pairs (ch. 5, "Multiwindow,
  Multi-Burn-Rate Alerts"): 2% of a 30-day budget in 1 h (14.4x), 5% in 6 h (6x), each confirmed by a
  window a twelfth as long so that the alert stops soon after the errors do.
- **p99 latency, milliseconds.** Triton: the servers run with latency summaries (``--metrics-config
  summary_latencies=true``, quantile 0.99 over a sliding minute, per pod): a model's p99 is its worst pod's.
  Triton leaves out the request summary of a model with the response cache, so there the p99 is the sum of
  its stages' p99s (queue, input, infer, output: at least each stage's own, an over-estimate of the whole
  that errs towards alerting). A decoupled (streaming) model's SLA is its first response, from the only
  latency histogram Triton 2.51 and 2.73 export (``nv_inference_first_response_histogram_ms``). vLLM: the
  TTFT and per-request TPOT histograms, aggregated over pods.

A consumer needing another window or aggregation calls the same function with it; the selector is the only
thing that ties an expression to a deployment.
"""

from __future__ import annotations

from dataclasses import dataclass

# (name, long window, short window, burn-rate factor): page on the fast pair, open a ticket on the slow one.
FAST_BURN = ("fast", "1h", "5m", 14.4)
SLOW_BURN = ("slow", "6h", "30m", 6.0)
SLO_PERIOD = "30d"  # the period the error budget is spent over (the burn-rate factors assume it)
TRITON_FAILURE_REASONS = ("REJECTED", "BACKEND", "OTHER")
VLLM_GOOD_REASONS = ("stop", "length", "repetition")
VLLM_ERROR_REASON = "error"
TRITON_STAGES = ("queue", "compute_input", "compute_infer", "compute_output")


@dataclass(frozen=True)
class Target:
    """Series of one model served by one workload: ``job`` is the workload's Service (the ServiceMonitor's
    job label), ``model_label`` the engine's label for the model (Triton: ``model``, vLLM: ``model_name``)."""

    namespace: str
    job: str
    model: str | None = None
    model_label: str = "model"
    version: str | None = None  # Triton's version label: one version's series (an A/B split's side); None: all


    def selector(self, **extra: str) -> str:
        """``{namespace="..",job="..",model=".."}`` plus ``extra`` (a value starting ``=~`` or ``!=`` keeps
        its operator)."""
        pairs = [("namespace", self.namespace), ("job", self.job)]
        if self.model is not None:
            pairs.append((self.model_label, self.model))
        if self.version is not None:
            pairs.append(("version", self.version))
        parts = [f'{k}="{v}"' for k, v in pairs]
        for key, value in extra.items():
            op, text = (value[:2], value[2:]) if value[:2] in ("=~", "!=") else ("=", value)
            parts.append(f'{key}{op}"{text}"')
        return "{" + ",".join(parts) + "}"


def _rate(metric: str, target: Target, window: str, **extra: str) -> str:
    return f"sum(rate({metric}{target.selector(**extra)}[{window}]))"


# ---------------------------------------------------------------------------------------------- callers
def caller_request_rate(target: Target, window: str, protocol: str) -> str:
    """Requests per second of one protocol (http, grpc) through a Triton server's caller proxy, by caller
    (render/k8s/callers.py: the ServiceMonitor names HAProxy's backends as protocol and caller)."""
    return f"sum by (caller) (rate(haproxy_backend_http_requests_total{target.selector(protocol=protocol)}[{window}]))"


def caller_server_error_rate(target: Target, window: str) -> str:
    """HTTP requests answered with a 5xx, per second, by caller (a gRPC failure travels as a 200 carrying its
    grpc-status: Triton's own failure counter has those)."""
    selector = target.selector(protocol="http", code="5xx")
    return f"sum by (caller) (rate(haproxy_backend_http_responses_total{selector}[{window}]))"


# ---------------------------------------------------------------------------------------------- availability
def triton_failed_rate(target: Target, window: str) -> str:
    return _rate("nv_inference_request_failure", target, window, reason="=~" + "|".join(TRITON_FAILURE_REASONS))


def triton_rejected_rate(target: Target, window: str) -> str:
    """Requests the queue policy refused (timeout or full queue), per second."""
    return _rate("nv_inference_request_failure", target, window, reason="REJECTED")


def triton_request_rate(target: Target, window: str) -> str:
    """Answered requests per second (cache hits included)."""
    return _rate("nv_inference_request_success", target, window)


def triton_batch_size(target: Target, window: str) -> str:
    """Requests (batch items) per execution: the batch the dynamic batcher actually formed, on average."""
    return f"({_rate('nv_inference_count', target, window)} / {_rate('nv_inference_exec_count', target, window)})"


def triton_mean_latency_ms(target: Target, window: str) -> str:
    """Mean end-to-end request time inside Triton, milliseconds (its cumulative duration counter)."""
    return (f"({_rate('nv_inference_request_duration_us', target, window)} / "
            f"{_rate('nv_inference_request_success', target, window)} / 1000)")


def triton_error_ratio(target: Target, window: str) -> str:
    failed = triton_failed_rate(target, window)
    return f"({failed} / ({triton_request_rate(target, window)} + {failed}))"


def vllm_failed_rate(target: Target, window: str) -> str:
    errors = _rate("vllm:request_success_total", target, window, finished_reason=VLLM_ERROR_REASON)
    return f"({errors} + {_rate('vllm:admission_rejections_total', target, window)})"


def vllm_request_rate(target: Target, window: str) -> str:
    """Requests finished normally per second."""
    return _rate("vllm:request_success_total", target, window, finished_reason="=~" + "|".join(VLLM_GOOD_REASONS))


def vllm_error_ratio(target: Target, window: str) -> str:
    failed = vllm_failed_rate(target, window)
    return f"({failed} / ({vllm_request_rate(target, window)} + {failed}))"


def burn_rate(error_ratio: str, availability_percent: float) -> str:
    """How many times faster than the SLO allows the error budget is being spent."""
    return f"({error_ratio} / {error_budget(availability_percent):g})"


def error_budget(availability_percent: float) -> float:
    """The share of requests that may fail: 99.9% -> 0.001."""
    return round(1 - availability_percent / 100, 10)


def availability_ratio(error_ratio: str) -> str:
    """The share of requests answered (1 - error ratio): SLA attainment over the ratio's window."""
    return f"(1 - {error_ratio})"


# ---------------------------------------------------------------------------------------------- latency
def triton_p99_ms(target: Target, cached: bool) -> str:
    """The worst pod's p99 request latency over Triton's sliding minute (see the module docstring)."""
    if not cached:
        return f'(max(nv_inference_request_summary_us{target.selector(quantile="0.99")}) / 1000)'
    stages = " + ".join(f'nv_inference_{stage}_summary_us{target.selector(quantile="0.99")}' for stage in TRITON_STAGES)
    return f"(max({stages}) / 1000)"


def histogram_p99(metric: str, target: Target, window: str, scale: float = 1.0) -> str:
    """The p99 of a histogram's observations over the window, all pods together, times ``scale``."""
    quantile = f"histogram_quantile(0.99, sum by (le) (rate({metric}_bucket{target.selector()}[{window}])))"
    return quantile if scale == 1.0 else f"({quantile} * {scale:g})"


def triton_first_response_p99_ms(target: Target, window: str) -> str:
    """A decoupled model's p99 time to its first response (Triton's histogram is in milliseconds)."""
    return histogram_p99("nv_inference_first_response_histogram_ms", target, window)


def vllm_ttft_p99_ms(target: Target, window: str) -> str:
    return histogram_p99("vllm:time_to_first_token_seconds", target, window, 1000)


def vllm_tpot_p99_ms(target: Target, window: str) -> str:
    """Per request: (end-to-end - first token) / (output tokens - 1), its p99 over requests."""
    return histogram_p99("vllm:request_time_per_output_token_seconds", target, window, 1000)


# ---------------------------------------------------------------------------------------------- saturation
def triton_queue_depth(target: Target) -> str:
    """Requests waiting in the busiest pod's scheduler queue for this model."""
    return f"max(nv_inference_pending_request_count{target.selector()})"


def triton_cache_hit_ratio(target: Target, window: str) -> str:
    hits = _rate("nv_cache_num_hits_per_model", target, window)
    return f"({hits} / ({hits} + {_rate('nv_cache_num_misses_per_model', target, window)}))"


def vllm_running(target: Target) -> str:
    """Sequences in the busiest pod's batch."""
    return f"max(vllm:num_requests_running{target.selector()})"


def vllm_waiting(target: Target) -> str:
    """Requests waiting for a place in the batch, all pods."""
    return f"sum(vllm:num_requests_waiting{target.selector()})"


def vllm_kv_cache_usage(target: Target) -> str:
    """The fullest pod's KV cache, 0 to 1."""
    return f"max(vllm:kv_cache_usage_perc{target.selector()})"


def vllm_prefix_cache_hit_ratio(target: Target, window: str) -> str:
    hits = _rate("vllm:prefix_cache_hits_total", target, window)
    return f"({hits} / {_rate('vllm:prefix_cache_queries_total', target, window)})"


def vllm_tokens_per_s(target: Target, window: str) -> str:
    return _rate("vllm:generation_tokens_total", target, window)


# ---------------------------------------------------------------------------------------------- the cluster
def hpa_at_max(namespace: str, name: str) -> str:
    """1 when the HPA runs as many replicas as it may (kube-state-metrics), else 0."""
    selector = f'{{namespace="{namespace}",horizontalpodautoscaler="{name}"}}'
    return (f"(max(kube_horizontalpodautoscaler_status_current_replicas{selector}) >= bool "
            f"max(kube_horizontalpodautoscaler_spec_max_replicas{selector}))")


def pods_not_ready(namespace: str, pod_pattern: str) -> str:
    """Pods of the workload whose Ready condition is false or unknown (kube-state-metrics)."""
    return (f'sum(kube_pod_status_ready{{namespace="{namespace}",pod=~"{pod_pattern}",condition=~"false|unknown"}})'
            " or vector(0)")


def gpus_requested(namespace: str, pod_pattern: str) -> str:
    """GPUs the workload's pods request now (kube-state-metrics)."""
    return (f'sum(kube_pod_container_resource_requests{{namespace="{namespace}",pod=~"{pod_pattern}",'
            f'resource="nvidia_com_gpu"}}) or vector(0)')


def workload_pods(name: str, groups: bool = False) -> str:
    """A regex matching exactly the workload's pods: a Deployment's ``<name>-<template hash>-<suffix>``, or
    (``groups``) a LeaderWorkerSet's ``<name>-<group>`` and ``<name>-<group>-<worker>``. Prometheus anchors it,
    so a Deployment's pattern never matches another workload whose name extends this one (its pods' names
    hold one more dash-separated part); a LeaderWorkerSet named ``x`` would match one named ``x-<digits>``."""
    return f"{name}-[0-9]+(-[0-9]+)?" if groups else f"{name}-[a-z0-9]+-[a-z0-9]{{5}}"
