"""Overload on the REAL tritonserver with the compiled queue policy: stale requests are rejected, and counted.

Why the stand-in: the compiled queue bound (max_queue_size = what one instance drains within the timeout)
means that while execution runs at the plan's speed, excess load is refused at the door ("Exceeds maximum
queue size"). The timeout is the backstop for the rest. To make it act deterministically on any CPU, the
image-preprocessor is served here by its synthetic stand-in (its artifact is left out of the artifact root),
which takes the plan's time exactly: max(compute_ms, n / rps_per_instance) per batch of n. A full queue then
needs longer than the timeout to drain, so under an overload of 3x the plan's rps_per_instance, sent at a
steady pace from a thread pool, the requests at its back go stale, and Triton must reject them with 503
"Request timeout expired" instead of serving them late.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.engines.conftest import engine_import, require_tritonserver  # noqa: E402

require_tritonserver()

np = engine_import("triton", "numpy")
httpclient = engine_import("triton", "tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

from modelfleet.engines.probes import metric_value, scrape_metrics  # noqa: E402
from tests.engines.conftest import served  # noqa: E402

pytestmark = pytest.mark.engine

MODEL = "image-preprocessor"
TIMEOUT, QUEUE_FULL = "timeout", "queue-full"
OVERLOAD = 3.0  # x the plan's rps_per_instance for one instance
REQUESTS = 1200  # about 1.1 s of sending at 3 x 364 req/s
THREADS = 64  # enough for every request in flight at that rate: the pace, not the pool, sets the load


class Clients:
    """One tritonclient.http client per thread (a shared one is not thread-safe; one per call costs a TCP
    connection each, which on a 2-core machine starves the server); all closed at the end."""

    def __init__(self, url: str) -> None:
        self.url, self.local, self.all = url, threading.local(), []
        self.lock = threading.Lock()

    def get(self):
        if not hasattr(self.local, "client"):
            self.local.client = httpclient.InferenceServerClient(self.url)
            with self.lock:
                self.all.append(self.local.client)
        return self.local.client

    def close(self) -> None:
        for client in self.all:
            client.close()


def call(clients: Clients, index: int) -> tuple[str, float]:
    """One request: (outcome, seconds)."""
    tensor = httpclient.InferInput("image_bytes", [1, 1], "BYTES")
    tensor.set_data_from_numpy(np.array([[f"image {index}".encode()]], dtype=np.object_))  # distinct: no cache
    started = time.perf_counter()
    try:
        clients.get().infer(MODEL, [tensor])
        return "ok", time.perf_counter() - started
    except InferenceServerException as error:
        return outcome(error), time.perf_counter() - started


def outcome(error: InferenceServerException) -> str:
    """The two 503s of an overloaded queue, by their messages; anything else verbatim (a test failure)."""
    text = str(error)
    if error.status() == "503" and "Request timeout expired" in text:
        return TIMEOUT
    if error.status() == "503" and "Exceeds maximum queue size" in text:
        return QUEUE_FULL
    return text


@pytest.fixture(scope="module")
def overloaded(dev_plan, tmp_path_factory: pytest.TempPathFactory):
    """Serve the preprocessor's compiled server (stand-in), overload it once; (server, outcomes, metrics)."""
    tmp = tmp_path_factory.mktemp("overload")
    (tmp / "artifacts").mkdir()
    server_name = dev_plan.model(MODEL).server
    with served(dev_plan, tmp / "artifacts", tmp / "work", (server_name,)) as (server, local):
        assert [m.source for m in local.models] == ["synthetic"]
        url = server.http_url.removeprefix("http://")
        before = scrape_metrics(server.metrics_url)
        outcomes = paced(url, OVERLOAD * dev_plan.model(MODEL).rps_per_instance)
        after = scrape_metrics(server.metrics_url)
        yield outcomes, before, after


def paced(url: str, rate: float) -> list[tuple[str, float]]:
    """Send REQUESTS at ``rate`` per second (open loop: arrivals do not wait for answers)."""
    clients = Clients(url)
    try:
        with ThreadPoolExecutor(THREADS) as pool:
            start = time.perf_counter()
            futures = []
            for index in range(REQUESTS):
                time.sleep(max(0.0, start + index / rate - time.perf_counter()))
                futures.append(pool.submit(call, clients, index))
            return [future.result() for future in futures]
    finally:
        clients.close()


def delta(before, after, name: str, **labels: str) -> float:
    return metric_value(after, name, **labels) - metric_value(before, name, **labels)


def test_overload_rejects_stale_requests_with_503_request_timeout_expired(overloaded) -> None:
    outcomes, _, _ = overloaded
    kinds = Counter(kind for kind, _ in outcomes)
    assert set(kinds) <= {"ok", TIMEOUT, QUEUE_FULL}, kinds
    assert kinds[TIMEOUT] >= 10, kinds  # 40-60 of 1200 here
    assert kinds["ok"] >= 5, kinds  # 20-40 of 1200 here: the queue bound refuses the rest at once


def test_timeout_rejections_are_counted_as_rejected_failures(overloaded, dev_plan) -> None:
    """nv_inference_request_failure{reason="REJECTED"} counts exactly the timed-out requests.

    Queue-full refusals never reach the model's statistics (measured: not counted there), so the bench
    counts them separately.
    """
    outcomes, before, after = overloaded
    kinds = Counter(kind for kind, _ in outcomes)
    assert delta(before, after, "nv_inference_request_failure", model=MODEL, reason="REJECTED") == kinds[TIMEOUT]
    assert delta(before, after, "nv_inference_request_success", model=MODEL) == kinds["ok"]


def test_served_requests_never_waited_past_the_compiled_timeout(overloaded, dev_plan) -> None:
    """Server side: answered requests spent on average less than the compiled timeout in the queue.

    (Client-side latency is not bounded here: on a busy 2-core machine execution itself slows down.)
    """
    _, before, after = overloaded
    plan = dev_plan.model(MODEL)
    queued_us = delta(before, after, "nv_inference_queue_duration_us", model=MODEL)
    answered = delta(before, after, "nv_inference_request_success", model=MODEL)
    assert 0 < queued_us / answered < plan.queue_timeout_us
