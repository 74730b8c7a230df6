"""Triton's OpenTelemetry tracing as the stack option compiles it (``modelfleet:triton.tracing``), on the REAL
tritonserver: the flags start the server, and sampled requests' spans reach a collector over OTLP/HTTP,
naming the server (service.name) and the stack (deployment.environment).

The collector is a plain HTTP receiver on loopback that records what it is sent (2.51's exporter posts OTLP
as JSON, which OpenTelemetry collectors accept on the same endpoint). The flags are the same on the deployed release
(Triton's own OpenTelemetry tests on main use them: docs/engines.md).
"""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from tests.engines.conftest import engine_import, require_tritonserver

require_tritonserver()
engine_import("triton", "aiohttp")

from modelfleet.engines.loadgen import infer_body, open_loop  # noqa: E402
from modelfleet.plan.compiler import compile_fleet  # noqa: E402
from modelfleet.spec.environment import TritonTracingSettings  # noqa: E402
from tests.engines.conftest import served  # noqa: E402

pytestmark = pytest.mark.engine
MODEL = "fraud-scorer"


class Collector(http.server.ThreadingHTTPServer):
    def __init__(self) -> None:
        self.posts: list[tuple[str, str, bytes]] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1/traces"


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (the standard library's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.server.posts.append((self.path, self.headers.get("Content-Type", ""), body))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def collector():
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_sampled_requests_reach_the_collector_from_the_real_server(project, collector, tmp_path) -> None:
    env = project.environment("dev")
    tracing = TritonTracingSettings(collector_url=collector.url, sampling_rate=0.5)
    env = env.model_copy(update={"triton": env.triton.model_copy(update={"tracing": tracing})})
    plan = compile_fleet(project.fleet(), env, project.catalogue())
    server = plan.server(plan.model(MODEL).server)
    flags = tuple(a for a in server.args if a.startswith("--trace-config="))
    assert "--trace-config=mode=opentelemetry" in flags and "--trace-config=rate=2" in flags
    (tmp_path / "artifacts").mkdir()
    with served(plan, tmp_path / "artifacts", tmp_path / "work", (server.name,), flags, only=(MODEL,)) as (triton, _):
        model = plan.model(MODEL)
        open_loop(triton.http_url, MODEL, [infer_body(model, i) for i in range(40)], 40.0)
        deadline = time.monotonic() + 30  # the exporter sends a batch every 5 s
        while not collector.posts and time.monotonic() < deadline:
            time.sleep(0.2)
    assert collector.posts, "no spans reached the collector"
    assert {(path, kind) for path, kind, _ in collector.posts} == {("/v1/traces", "application/json")}
    batches = [json.loads(body) for _, _, body in collector.posts]
    resources = [r for batch in batches for r in batch["resourceSpans"]]
    attributes = {(a["key"], a["value"].get("stringValue")) for r in resources for a in r["resource"]["attributes"]}
    assert {("service.name", server.name), ("deployment.environment", plan.environment)} <= attributes
    traces = {s["traceId"] for r in resources for scope in r["scopeSpans"] for s in scope["spans"]}
    print(f"{len(traces)} traces of 40 requests at one in 2")
    assert 10 <= len(traces) <= 21  # one request in two (20 here); the last may still be in the exporter
