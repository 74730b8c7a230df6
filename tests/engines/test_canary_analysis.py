"""The canary analysis (#15) measures what the real tritonserver publishes: a real Prometheus scrapes a real
tritonserver serving fraud-scorer as compiled (its flags, summary latencies included), labelled as the
ServiceMonitor labels a canary pod, and every query of the server's AnalysisTemplate for fraud-scorer
returns a finite value that passes its success condition on a healthy server. A query that returns no data
fails: that is what a misspelt metric or label would do. A selector for another pod-template hash returns
nothing, so the queries select the canary's pods only.
"""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import numpy as np
import pytest

from tests.engines.client_threads import ClientThreads
from tests.engines.conftest import engine_import, make_artifact_root, require_tritonserver, served

require_tritonserver()
httpclient = engine_import("triton", "tritonclient.http")

from tritonclient.utils import InferenceServerException  # noqa: E402
from modelfleet.render.analysis import CANARY_HASH  # noqa: E402
from modelfleet.render.manifests import render_fleet_manifests  # noqa: E402
from tests.observability.prometheus_server import LocalPrometheus, ScrapeTarget  # noqa: E402

pytestmark = pytest.mark.engine

MODEL = "fraud-scorer"
CANARY = "5f7d8c9b6d"  # the canary ReplicaSet's pod-template hash, as Argo Rollouts passes it
SCRAPE_S = 1
REQUESTS = 60


def analysis_metrics(plan, server: str) -> list[dict]:
    objects = render_fleet_manifests(plan, plan_deploy())[server]
    template = next(o for o in objects if o["kind"] == "AnalysisTemplate")
    return [m for m in template["spec"]["metrics"] if m["name"].startswith(MODEL + "-")]


def plan_deploy():
    from modelfleet.spec.environment import DeploySettings

    return DeploySettings()


def condition_holds(condition: str, value: float) -> bool:
    match = re.fullmatch(r"result\[0\] <= ([0-9.e-]+)", condition)
    assert match, condition
    return value <= float(match.group(1))


def measure(plan, tmp_path: Path, burst: int = 1) -> tuple[dict[str, float], dict[str, str], int, float]:
    """Serve fraud-scorer of ``plan``, scraped by a real Prometheus as a canary pod; send REQUESTS requests
    (``burst`` at a time) and evaluate every query of its AnalysisTemplate. (values by metric name, success
    conditions by metric name, requests the client saw rejected, the slowest answered round trip in ms)."""
    server = plan.model(MODEL).server
    metrics = analysis_metrics(plan, server)
    assert {m["name"] for m in metrics} == {f"{MODEL}-error-ratio", f"{MODEL}-p99-ms"}
    root = make_artifact_root(tmp_path / "s3", (MODEL,), preprocessor=False)
    with served(plan, root, tmp_path / "work", only=(MODEL,)) as (triton, _):
        target = triton.metrics_url.removeprefix("http://").removesuffix("/metrics")
        kube_name = plan.server(server).kube_name  # the canary's pods carry the cluster's name for it
        scrape = ScrapeTarget("triton", target, {"namespace": plan.namespace, "pod": f"{kube_name}-{CANARY}-x7k2p"})
        with LocalPrometheus(tmp_path / "prometheus", [scrape], []) as prometheus:
            # Ready is not scraping: the scrape manager applies its first targets up to 5 s later. A rate()
            # needs the counters' values from before the requests, so wait for the first scrape.
            assert prometheus.wait_for('up{job="triton"} == 1', 60), "prometheus did not scrape the server"
            query = prometheus.query
            slowest_ms, rejected = send_requests(triton, burst)
            time.sleep(3 * SCRAPE_S)
            selector = f'pod=~"{kube_name}-{CANARY}-.*", model="{MODEL}"'
            mean = query(f"sum(rate(nv_inference_request_duration_us{{{selector}}}[2m])) / "
                              f"sum(rate(nv_inference_request_success{{{selector}}}[2m])) / 1000")
            values = {"mean-ms": float(mean[0]["value"][1]) if mean else math.nan}
            for metric in metrics:
                promql = metric["provider"]["prometheus"]["query"]
                result = query(promql.replace(f"{{{{args.{CANARY_HASH}}}}}", CANARY))
                assert len(result) == 1, (metric["name"], promql, result)
                values[metric["name"]] = float(result[0]["value"][1])
                other = query(promql.replace(f"{{{{args.{CANARY_HASH}}}}}", "0000000000"))
                assert other == [] or all(math.isnan(float(r["value"][1])) for r in other), (metric["name"], other)
    return values, {m["name"]: m["successCondition"] for m in metrics}, rejected, slowest_ms


def test_every_analysis_query_returns_data_from_the_real_server(dev_plan, tmp_path: Path) -> None:
    values, conditions, rejected, slowest_ms = measure(dev_plan, tmp_path)
    assert all(math.isfinite(v) for v in values.values()), values
    errors = values[f"{MODEL}-error-ratio"]
    # What the client saw rejected (a busy machine may miss the 11 ms queue timeout), counted by Triton too.
    # within half a request of 60 (1/120): one request miscounted either way fails it
    assert errors == pytest.approx(rejected / REQUESTS, abs=1 / (2 * REQUESTS)), (errors, rejected)
    assert condition_holds(conditions[f"{MODEL}-error-ratio"], errors) == (rejected == 0)
    # A sum of stage p99s: above Triton's own mean request time, and in milliseconds (not microseconds: within a
    # few times the slowest round trip the client saw; measured 18 ms against 15 ms). This CPU's p99 is not the
    # GPU's SLA, so the condition itself is not asserted here.
    assert 0 < values["mean-ms"] <= values[f"{MODEL}-p99-ms"] < 5 * slowest_ms, (values, slowest_ms)


def with_queue_timeout(plan, name: str, timeout_us: int):
    """``plan`` with one model's compiled queue timeout replaced: a canary whose new config sheds its load."""
    models = tuple(m.model_copy(update={"queue_timeout_us": timeout_us}) if m.name == name else m for m in plan.models)
    return plan.model_copy(update={"models": models})


def test_a_canary_that_rejects_fails_its_analysis(dev_plan, tmp_path: Path) -> None:
    """The gate can close: a canary whose queue timeout (1 us, far below its 2 ms batching window) rejects
    what queues, under bursts of 8, reports an error ratio that breaks the success condition Argo Rollouts
    evaluates, so the rollout aborts and rolls back."""
    values, conditions, rejected, _ = measure(with_queue_timeout(dev_plan, MODEL, 1), tmp_path, burst=8)
    errors = values[f"{MODEL}-error-ratio"]
    assert rejected >= REQUESTS // 4, rejected  # the broken canary sheds a good share of what it is sent
    assert errors == pytest.approx(rejected / REQUESTS, abs=1 / (2 * REQUESTS)), (errors, rejected)
    assert not condition_holds(conditions[f"{MODEL}-error-ratio"], errors), (errors, conditions)


def send_requests(triton, burst: int = 1) -> tuple[float, int]:
    """REQUESTS requests, ``burst`` at a time from as many threads, spread over several scrapes (rate() needs a
    slope): the slowest answered round trip in ms, and how many were rejected (503)."""
    url = triton.http_url.removeprefix("http://")

    def one(client, i: int) -> float | None:  # each thread's own client (client_threads.py)
        features = httpclient.InferInput("features", [4, 64], "FP32")
        features.set_data_from_numpy(np.random.default_rng(i).random((4, 64), dtype=np.float32))
        started = time.perf_counter()
        try:
            client.infer(MODEL, [features])
        except InferenceServerException as error:
            assert "timeout" in str(error).lower(), error
            return None
        return (time.perf_counter() - started) * 1000

    times: list[float | None] = []
    with ClientThreads(burst, lambda: httpclient.InferenceServerClient(url)) as threads:
        for start in range(0, REQUESTS, burst):
            times += threads.map(one, range(start, min(start + burst, REQUESTS)))
            time.sleep(0.1 * burst)
    answered = [t for t in times if t is not None]
    return max(answered, default=0.0), len(times) - len(answered)
