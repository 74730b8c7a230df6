"""The load generator: requests, outcomes, summaries (pure), and latency counted from the schedule (a real
local HTTP server that answers one request at a time)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import pytest

from modelfleet.engines.loadgen import (
    OK,
    QUEUE_FULL,
    TIMEOUT,
    Sample,
    classify,
    infer_body,
    open_loop,
    percentile,
    summarise,
)
from tests.engines.conftest import engine_import


def test_bodies_follow_the_compiled_signature_and_depend_only_on_the_key(dev_plan) -> None:
    preprocessor = dev_plan.model("image-preprocessor")
    body = json.loads(infer_body(preprocessor, 7))
    assert body["parameters"] == {"binary_data_output": True}
    assert body["inputs"] == [{"name": "image_bytes", "shape": [1, 1], "datatype": "BYTES", "data": ["request 7"]}]
    embedder = json.loads(infer_body(dev_plan.model("text-embedder"), 3))
    assert [(t["name"], t["shape"], t["datatype"], len(t["data"])) for t in embedder["inputs"]] == [
        ("input_ids", [1, 4], "INT64", 4), ("attention_mask", [1, 4], "INT64", 4)]
    assert infer_body(preprocessor, 7) == infer_body(preprocessor, 7) != infer_body(preprocessor, 8)


def test_outcomes_are_classified_by_triton_messages() -> None:
    assert classify(200, "") == OK
    assert classify(503, '{"error":"Request timeout expired"}') == TIMEOUT
    assert classify(503, '{"error":"Exceeds maximum queue size"}') == QUEUE_FULL
    assert classify(400, "bad input") == "error: 400 bad input"


def test_percentile_interpolates_like_numpy() -> None:
    np = pytest.importorskip("numpy")
    values = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0]
    for q in (0, 1, 50, 90, 99, 100):
        assert percentile(values, q) == pytest.approx(float(np.percentile(values, q)))


def test_summary_counts_goodput_over_the_schedule() -> None:
    samples = [Sample(0.00, 0.00, 0.030, OK), Sample(0.01, 0.012, 0.061, OK),  # 30 ms, 51 ms
               Sample(0.02, 0.02, 0.045, TIMEOUT), Sample(0.03, 0.05, 0.06, QUEUE_FULL)]
    summary = summarise(samples, sla_s=0.040, rate_rps=100.0)
    assert (summary.requests, summary.answered, summary.within_sla) == (4, 2, 1)
    assert (summary.rejected_timeout, summary.rejected_queue_full, summary.errors) == (1, 1, 0)
    assert summary.schedule_s == 0.04 and summary.goodput_rps == 25.0  # 1 answer within SLA in 40 ms
    assert summary.achieved_rps == 60.0  # 3 gaps in 50 ms
    assert summary.p50_ms == pytest.approx(40.5) and summary.lag_p99_ms == 19.5


@pytest.fixture
def serial_server() -> Iterator[str]:
    """An HTTP server that answers one request at a time, each after 50 ms: it sustains 20 req/s."""
    web = engine_import("triton", "aiohttp.web")
    loop = asyncio.new_event_loop()
    lock = asyncio.Lock()

    async def infer(request):
        await request.read()
        async with lock:
            await asyncio.sleep(0.05)
        return web.Response(body=b"{}")

    app = web.Application()
    app.router.add_post("/v2/models/m/infer", infer)
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.run_until_complete(runner.cleanup())
        loop.close()


def test_open_loop_counts_latency_from_the_schedule(serial_server: str) -> None:
    """At 100 req/s against 20 req/s of capacity, request i is answered about 50 (i+1) ms after the start
    but due at 10 i ms: its latency grows by ~40 ms per request. A closed-loop client (or one measuring
    from its own late send) would see ~50 ms throughout."""
    started = time.monotonic()
    samples = open_loop(serial_server, "m", [b"{}"] * 10, rate_rps=100.0)
    assert time.monotonic() - started >= 0.45
    assert [s.outcome for s in samples] == [OK] * 10
    assert [s.due_s for s in samples] == pytest.approx([i / 100 for i in range(10)])
    # the client kept to its schedule: a closed-loop client would send the last request ~0.36 s late (after
    # nine 50 ms answers); 0.2 s leaves room for a busy 2-core machine (0.12 s measured under a parallel suite)
    assert max(s.sent_s - s.due_s for s in samples) < 0.2
    latencies = sorted(s.latency_s for s in samples)
    assert latencies[0] >= 0.05 and latencies[-1] >= 0.40  # the last: answered at >= 0.5 s, due at 0.09 s
