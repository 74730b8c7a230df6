"""Smoke tests on the REAL tritonserver from the nvidia-pytriton wheel (CPU, python backend, local cache).

Why: the compiler's Triton output (dynamic batching, REJECT queue policy, response cache, the ONNX python
runner) is only trustworthy if a real server loads it and behaves as the config says.
"""

from __future__ import annotations

import importlib.util
import textwrap
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from tests.engines.conftest import engine_import, require_tritonserver  # noqa: E402

require_tritonserver()

np = engine_import("triton", "numpy")
httpclient = engine_import("triton", "tritonclient.http")

from modelfleet.engines import tritonserver  # noqa: E402
from modelfleet.engines.onnx_runner import write_python_runner  # noqa: E402
from modelfleet.engines.probes import metric_value, scrape_metrics  # noqa: E402
from modelfleet.engines.process import listens_on  # noqa: E402
from modelfleet.engines.tritonserver import (  # noqa: E402
    EngineUnavailable,
    LocalTritonServer,
    find_tritonserver,
    prepare_backends,
)

pytestmark = pytest.mark.engine

QUEUE_AND_CACHE = textwrap.dedent("""\
    dynamic_batching {
      max_queue_delay_microseconds: 1000
      default_queue_policy { timeout_action: REJECT default_timeout_microseconds: %d max_queue_size: %d }
    }
    response_cache { enable: true }
    """)

DOUBLER = textwrap.dedent('''\
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            return [pb_utils.InferenceResponse(
                        [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)])
                    for r in requests]
    ''')

SERVER_ARGS = ["--cache-config=local,size=1048576", "--exit-timeout-secs=5", "--strict-readiness=true"]


def write_config(model_dir: Path, inputs: str, outputs: str, *, timeout_us: int = 100_000,
                 max_queue_size: int = 8, max_batch_size: int = 8) -> None:
    """A python-backend config.pbtxt with the queue policy and the response cache under test."""
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(
        f'name: "{model_dir.name}"\nbackend: "python"\nmax_batch_size: {max_batch_size}\n'
        f"input [ {inputs} ]\noutput [ {outputs} ]\n"
        "instance_group [ { kind: KIND_CPU count: 1 } ]\n" + QUEUE_AND_CACHE % (timeout_us, max_queue_size))


def classifier_onnx() -> bytes:
    """X[N,8] -> Softmax(X @ W), W from numpy seed 0: small, deterministic, with a dynamic batch axis."""
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper

    weights = np.random.default_rng(0).standard_normal((8, 3)).astype(np.float32)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["logits"]),
         helper.make_node("Softmax", ["logits"], ["Y"], axis=-1)],
        "classifier",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 3])],
        initializer=[numpy_helper.from_array(weights, "W")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by any onnxruntime >= 1.10
    onnx.checker.check_model(model)
    return model.SerializeToString()


def infer(server: LocalTritonServer, model: str, x: np.ndarray) -> np.ndarray:
    """One HTTP inference (a fresh client: tritonclient.http clients are not thread-safe)."""
    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    try:
        tensor = httpclient.InferInput("X", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        return client.infer(model, [tensor]).as_numpy("Y")
    finally:
        client.close()


def test_metric_value_parses_prometheus_text() -> None:
    text = ('# HELP nv_inference_request_failure Number of failed inference requests\n'
            'nv_inference_request_failure{model="m",reason="REJECTED",version="1"} 15\n'
            'nv_inference_request_failure{model="m",reason="BACKEND",version="1"} 0\n'
            'nv_inference_request_failure{model="m",reason="REJECTED",version="2"} 1\n'
            'odd{label="a \\"quoted\\", b"} 2.5e3\n')
    assert metric_value(text, "nv_inference_request_failure", model="m", reason="REJECTED") == 16
    assert metric_value(text, "nv_inference_request_failure", version="1") == 15
    assert metric_value(text, "odd", label='a "quoted", b') == 2500
    with pytest.raises(KeyError):
        metric_value(text, "nv_inference_request_failure", model="other")


def test_missing_wheel_is_engine_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tritonserver.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(EngineUnavailable, match="nvidia-pytriton"):
        find_tritonserver()


def test_prepare_backends_copies_the_stub_once(tmp_path: Path) -> None:
    install = find_tritonserver()
    backends = prepare_backends(install, tmp_path)
    stub = backends / "python" / "triton_python_backend_stub"
    assert (backends / "python" / "libtriton_python.so").is_file() and stub.stat().st_mode & 0o111
    first = stub.stat().st_mtime_ns
    assert prepare_backends(install, tmp_path) == backends and stub.stat().st_mtime_ns == first


@pytest.fixture
def doubler_server(tmp_path: Path) -> Iterator[LocalTritonServer]:
    """A server with one python model that doubles its input, with queue policy and response cache."""
    model_dir = tmp_path / "repo" / "doubler"
    write_config(model_dir, '{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }',
                 '{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }')
    (model_dir / "1").mkdir()
    (model_dir / "1" / "model.py").write_text(DOUBLER)
    with LocalTritonServer(tmp_path / "repo", SERVER_ARGS, workdir=tmp_path / "work") as server:
        yield server


class AlwaysReady(BaseHTTPRequestHandler):
    """Another process's HTTP server that answers 200 to everything, readiness probes included."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_port_taken_by_another_server_is_not_mistaken_for_ours(tmp_path: Path) -> None:
    """The free ports are chosen before tritonserver binds them. If another server takes one meanwhile and
    answers readiness probes, ours must not be declared ready on its word: it is retried on new ports."""
    model_dir = tmp_path / "repo" / "doubler"
    write_config(model_dir, '{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }',
                 '{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }')
    (model_dir / "1").mkdir()
    (model_dir / "1" / "model.py").write_text(DOUBLER)
    server = LocalTritonServer(tmp_path / "repo", SERVER_ARGS, workdir=tmp_path / "work", expected_models=["doubler"])
    taken = server.http_port
    impostor = HTTPServer(("127.0.0.1", taken), AlwaysReady)
    threading.Thread(target=impostor.serve_forever, daemon=True).start()
    try:
        with server:
            assert server.http_port != taken
            assert server.process is not None and all(listens_on(server.process.pid, p) for p in server.ports)
            x = np.ones((1, 4), dtype=np.float32)
            np.testing.assert_array_equal(infer(server, "doubler", x), x * 2)
    finally:
        impostor.shutdown()
        impostor.server_close()


def test_python_model_with_queue_policy_and_response_cache(doubler_server: LocalTritonServer) -> None:
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    np.testing.assert_array_equal(infer(doubler_server, "doubler", x), x * 2)
    np.testing.assert_array_equal(infer(doubler_server, "doubler", x), x * 2)

    samples = scrape_metrics(doubler_server.metrics_url)
    assert metric_value(samples, "nv_cache_num_hits_per_model", model="doubler") >= 1
    assert metric_value(samples, "nv_cache_num_misses_per_model", model="doubler") >= 1
    assert metric_value(samples, "nv_inference_request_success", model="doubler") == 2
    assert metric_value(samples, "nv_inference_exec_count", model="doubler") == 1  # the repeat never ran


SLOW = textwrap.dedent('''\
    import time

    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            time.sleep(0.2)  # longer than the 50 ms queue timeout: the requests behind it go stale
            return [pb_utils.InferenceResponse(
                        [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)])
                    for r in requests]
    ''')


def test_queue_timeout_rejects_with_503_and_counts_rejected(tmp_path: Path) -> None:
    """REJECT policy: requests that waited longer than the queue timeout fail fast and are counted.

    Also proves that ``dynamic_batching`` (with its queue policy) is accepted with ``max_batch_size: 0``.
    """
    for name, max_batch_size in (("slow", 1), ("slow_unbatched", 0)):
        model_dir = tmp_path / "repo" / name
        write_config(model_dir, '{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }',
                     '{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }', timeout_us=50_000,
                     max_queue_size=100, max_batch_size=max_batch_size)
        (model_dir / "1").mkdir()
        (model_dir / "1" / "model.py").write_text(SLOW)
    with LocalTritonServer(tmp_path / "repo", SERVER_ARGS, workdir=tmp_path / "work") as server:
        for name, shape in (("slow", (1, 4)), ("slow_unbatched", (4,))):
            inputs = [np.full(shape, i, dtype=np.float32) for i in range(16)]  # distinct: no cache hits
            with ThreadPoolExecutor(16) as pool:
                errors = [e for e in pool.map(lambda x, n=name: _error_of(server, n, x), inputs) if e]
            assert errors and set(errors) == {("503", "[503] Request timeout expired")}, errors
            assert len(errors) < 16
            rejected = metric_value(scrape_metrics(server.metrics_url), "nv_inference_request_failure",
                                    model=name, reason="REJECTED")
            assert rejected == len(errors)


def test_the_queue_timeout_counts_the_batching_window(tmp_path: Path) -> None:
    """Triton's queue timeout runs from enqueueing, so time spent waiting for a batch to fill counts: with a
    batching window longer than the timeout, a lone request on an idle server is rejected, every time.
    A compiled config must therefore keep queue_timeout_us above max_queue_delay_us (the window is part
    of the time the timeout bounds, not added to it)."""
    model_dir = tmp_path / "repo" / "windowed"
    write_config(model_dir, '{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }',
                 '{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }', timeout_us=2_000, max_queue_size=100)
    config = model_dir / "config.pbtxt"
    config.write_text(config.read_text().replace("max_queue_delay_microseconds: 1000",
                                                 "max_queue_delay_microseconds: 20000"))  # 20 ms window
    (model_dir / "1").mkdir()
    (model_dir / "1" / "model.py").write_text(DOUBLER)
    with LocalTritonServer(tmp_path / "repo", SERVER_ARGS, workdir=tmp_path / "work") as server:
        errors = [_error_of(server, "windowed", np.full((1, 4), i, dtype=np.float32)) for i in range(5)]
    assert errors == [("503", "[503] Request timeout expired")] * 5


def _error_of(server: LocalTritonServer, model: str, x: np.ndarray) -> tuple[str, str] | None:
    """(HTTP status, message) of a failed inference, None on success."""
    from tritonclient.utils import InferenceServerException

    try:
        infer(server, model, x)
    except InferenceServerException as error:
        return str(error.status()), str(error)
    return None


@pytest.fixture(scope="module")
def onnx_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalTritonServer, bytes]]:
    """One server (shared by the ONNX tests) with the classifier served by the ONNX python runner."""
    tmp_path = tmp_path_factory.mktemp("onnx")
    model_bytes = classifier_onnx()
    model_dir = tmp_path / "repo" / "classifier"
    # A generous queue timeout: onnxruntime's first run on a busy 2-core machine can exceed 100 ms.
    write_config(model_dir, '{ name: "X" data_type: TYPE_FP32 dims: [ 8 ] }',
                 '{ name: "Y" data_type: TYPE_FP32 dims: [ 3 ] }', timeout_us=10_000_000, max_queue_size=32)
    write_python_runner(model_dir, model_bytes)
    with LocalTritonServer(tmp_path / "repo", SERVER_ARGS, workdir=tmp_path / "work") as server:
        yield server, model_bytes


def expected_output(model_bytes: bytes, x: np.ndarray) -> np.ndarray:
    """The classifier run directly by onnxruntime, the reference for the served answers."""
    ort = pytest.importorskip("onnxruntime")
    return ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"]).run(["Y"], {"X": x})[0]


def test_onnx_runner_matches_onnxruntime(onnx_server: tuple[LocalTritonServer, bytes]) -> None:
    server, model_bytes = onnx_server
    x = np.random.default_rng(1).standard_normal((5, 8)).astype(np.float32)
    got = infer(server, "classifier", x)
    assert got.shape == (5, 3)
    np.testing.assert_allclose(got, expected_output(model_bytes, x), rtol=1e-6, atol=1e-7)


def test_onnx_runner_concurrent_requests(onnx_server: tuple[LocalTritonServer, bytes]) -> None:
    """Concurrent requests may be merged by the dynamic batcher; each must still get its own rows."""
    server, model_bytes = onnx_server
    before = scrape_metrics(server.metrics_url)
    rng = np.random.default_rng(2)
    inputs = [rng.standard_normal((1 + i % 2, 8)).astype(np.float32) for i in range(8)]
    with ThreadPoolExecutor(8) as pool:
        outputs = list(pool.map(lambda x: infer(server, "classifier", x), inputs))
    for x, got in zip(inputs, outputs):
        np.testing.assert_allclose(got, expected_output(model_bytes, x), rtol=1e-6, atol=1e-7)
    after = scrape_metrics(server.metrics_url)
    success = [metric_value(m, "nv_inference_request_success", model="classifier") for m in (before, after)]
    assert success[1] - success[0] == 8
