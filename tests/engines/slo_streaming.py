"""A real tritonserver with one streaming (decoupled) model, compiled and served as ``modelfleet serve`` would,
after one streamed request: where Triton's only latency histogram (time to first response) appears."""

from __future__ import annotations

import queue
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from modelfleet.plan.compiler import compile_fleet
from modelfleet.spec.load import parse_fleet_text
from tests.conftest import ROOT
from tests.engines.conftest import served

MODEL = "token-streamer"
FLEET = """
models:
  - name: token-streamer
    type: other
    framework: python
    artifact: s3://modelfleet-tests/token-streamer
    size: {memory_gib: 0.1}
    streaming: true
    handles_cancellation: true
    inputs: [{name: count, dtype: int32, dims: [1]}]
    outputs: [{name: token, dtype: int32, dims: [1]}]
    sla: {p99_latency_ms: 100, peak_rps: 10}
    profile: {rps_per_instance: 100, compute_ms: 10}
"""


@contextmanager
def served_streaming_model(project, tmp: Path) -> Iterator[tuple]:
    """(plan, LocalTritonServer) with the token streamer, after it streamed 3 tokens for one request."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    plan = compile_fleet(parse_fleet_text(FLEET), project.environment("dev"), project.catalogue())
    shutil.copytree(ROOT / "tests/engines/artifacts/token-streamer", tmp / "artifacts/modelfleet-tests/token-streamer")
    with served(plan, tmp / "artifacts", tmp / "work") as (server, _):
        responses: queue.Queue = queue.Queue()
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            client.start_stream(callback=lambda result, error: responses.put(error or result))
            request = grpcclient.InferInput("count", [1, 1], "INT32")
            request.set_data_from_numpy(np.array([[3]], np.int32))
            client.async_stream_infer(MODEL, [request])
            tokens = [responses.get(timeout=30) for _ in range(3)]
            assert all(not isinstance(t, Exception) for t in tokens), tokens
        finally:
            client.stop_stream()
            client.close()
        yield plan, server
