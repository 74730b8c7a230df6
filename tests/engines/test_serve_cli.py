"""``modelfleet serve`` as a user runs it: a real process, real endpoints, a clean stop on SIGTERM.

Why a subprocess: signal handling, output and process-group cleanup are the command's job and can only be
seen from outside. The process is always stopped, even when an assertion fails.
"""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.conftest import engine_import, require_tritonserver  # noqa: E402

require_tritonserver()

np = engine_import("triton", "numpy")
httpclient = engine_import("triton", "tritonclient.http")

from tests.conftest import ROOT  # noqa: E402
from tests.engines.conftest import make_artifact_root  # noqa: E402

pytestmark = pytest.mark.engine

READY_LINE = "Ctrl-C or SIGTERM stops it"


class Output:
    """The command's stdout, line by line, read on a thread so that waiting can have a deadline."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, args=(process,), daemon=True).start()

    def _pump(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, text: str, seconds: float) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            if line is None:
                break
            self.lines.append(line)
            if text in line:
                return "\n".join(self.lines)
        raise AssertionError(f"{text!r} not printed within {seconds} s:\n" + "\n".join(self.lines))


def servers_of(plan) -> list[str]:
    """The compiled servers holding the classifier and the embedder (one server in today's dev plan)."""
    return sorted({plan.model(name).server for name in ("resnet50-classifier", "text-embedder")})


@pytest.fixture
def serve_process(dev_plan, tmp_path: Path) -> Iterator[tuple[subprocess.Popen[str], Output]]:
    """`modelfleet serve` for the classifier's and the embedder's servers; the embedder's artifact is left out."""
    root = make_artifact_root(tmp_path / "artifacts", ("resnet50-classifier", "fraud-scorer"), preprocessor=True)
    command = [sys.executable, "-m", "modelfleet", "--project", str(ROOT), "serve", "--stack", "dev",
               "--model-dir-root", str(root), "--workdir", str(tmp_path / "work")]
    command += [arg for server in servers_of(dev_plan) for arg in ("--server", server)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               cwd=tmp_path)
    output = Output(process)
    try:
        yield process, output
    finally:
        server_pid = re.search(r"tritonserver pid (\d+)", "\n".join(output.lines))
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(60)
            except subprocess.TimeoutExpired:
                process.kill()
        if server_pid:  # never leave a tritonserver behind, whatever happened above
            try:
                os.killpg(int(server_pid.group(1)), signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_serve_prints_adaptations_and_endpoints_answers_and_stops_on_sigterm(serve_process, dev_plan) -> None:
    process, output = serve_process
    count = sum(len(dev_plan.server(name).models) for name in servers_of(dev_plan))
    text = output.until(READY_LINE, 120)
    assert "instance_group: KIND_GPU -> KIND_CPU" in text
    assert "capped to 256 MiB" in text
    assert re.search(r"text-embedder\s+SYNTHETIC stand-in", text)
    assert re.search(r"resnet50-classifier\s+real artifact .*model\.onnx through onnxruntime", text)
    assert "ready in" in text and f"{count}/{count} models ready" in text
    http = re.search(r"HTTP\s+http://(127\.0\.0\.1:\d+)", text).group(1)
    assert re.search(r"gRPC\s+127\.0\.0\.1:\d+", text) and re.search(r"metrics\s+http://127\.0\.0\.1:\d+/metrics", text)

    client = httpclient.InferenceServerClient(http)
    try:
        images = httpclient.InferInput("images", [1, 3, 224, 224], "FP32")
        images.set_data_from_numpy(np.ones((1, 3, 224, 224), np.float32))
        probabilities = client.infer("resnet50-classifier", [images]).as_numpy("probabilities")
        ids = httpclient.InferInput("input_ids", [1, 4], "INT64")
        ids.set_data_from_numpy(np.ones((1, 4), np.int64))
        mask = httpclient.InferInput("attention_mask", [1, 4], "INT64")
        mask.set_data_from_numpy(np.ones((1, 4), np.int64))
        embedding = client.infer("text-embedder", [ids, mask]).as_numpy("embedding")
    finally:
        client.close()
    assert probabilities.shape == (1, 1000) and abs(float(probabilities.sum()) - 1.0) < 1e-4  # real softmax
    assert embedding.shape == (1, 384) and not embedding.any()  # the stand-in answers zeros

    server_pid = int(re.search(r"tritonserver pid (\d+)", text).group(1))
    process.send_signal(signal.SIGTERM)
    assert process.wait(60) == 0
    output.until("tritonserver stopped (exit code 0)", 5)
    with pytest.raises(ProcessLookupError):
        os.killpg(server_pid, 0)  # the server and its python stubs are gone
