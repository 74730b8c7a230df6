"""The example fleet's compiled classic models on the REAL tritonserver, with their real (small) artifacts.

One server for the module (the dev stack, all compiled Triton servers in one local tritonserver, as
``modelfleet serve`` runs it). Requests are built and decoded by the client module ``modelfleet client``
generates, so that module is tested against the real server too.
"""

from __future__ import annotations

import time

from concurrent.futures import ThreadPoolExecutor
from types import ModuleType

import pytest

from tests.engines.conftest import engine_import, require_tritonserver  # noqa: E402

require_tritonserver()

np = engine_import("triton", "numpy")
ort = engine_import("triton", "onnxruntime")
httpclient = engine_import("triton", "tritonclient.http")
grpcclient = engine_import("triton", "tritonclient.grpc")
from tritonclient.grpc import model_config_pb2 as mc  # noqa: E402
from tritonclient.utils import InferenceServerException, triton_to_np_dtype  # noqa: E402

from modelfleet.engines.probes import metric_value, scrape_metrics  # noqa: E402
from modelfleet.plan.types import TritonModelPlan  # noqa: E402
from modelfleet.render.client import render_client  # noqa: E402
from modelfleet.render.fleet import render_fleet  # noqa: E402
from modelfleet.render.triton import parse_config  # noqa: E402
from tests.engines.conftest import load_module, make_artifact_root, served, served_config  # noqa: E402

pytestmark = pytest.mark.engine

ONNX_MODELS = ("fraud-scorer", "resnet50-classifier", "text-embedder")
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


@pytest.fixture(scope="module")
def fleet(dev_plan, tmp_path_factory: pytest.TempPathFactory):
    """(server, local repository, artifact root, generated client module) for the whole dev fleet."""
    tmp = tmp_path_factory.mktemp("fleet")
    root = make_artifact_root(tmp / "artifacts", ONNX_MODELS, preprocessor=True)
    (tmp / "fleet_client.py").write_text(render_client(dev_plan))
    client_module = load_module(tmp / "fleet_client.py", "fleet_client_dev")
    with served(dev_plan, root, tmp / "work") as (server, local):
        yield server, local, root, client_module


def ppm(pixels: np.ndarray) -> bytes:
    """uint8 [height, width, 3] -> binary PPM (P6): the simplest real image file format."""
    height, width, _ = pixels.shape
    return f"P6\n# test image\n{width} {height}\n255\n".encode() + pixels.astype(np.uint8).tobytes()


def sample(model, rng: np.random.Generator, batch: int = 2) -> list[np.ndarray]:
    """Valid inputs for a generated client class: random values of each compiled dtype and shape."""
    values = []
    for tensor in model.inputs:
        dims = [5 if d == -1 else d for d in tensor.dims]
        if tensor.datatype == "BYTES":
            image = ppm(rng.integers(0, 256, (32, 48, 3)))
            values.append(np.array([[image]] * batch, dtype=np.object_))
        elif tensor.datatype == "INT64":
            values.append(rng.integers(0, 30_000, (batch, *dims)).astype(np.int64))
        else:
            values.append(rng.standard_normal((batch, *dims)).astype(np.float32))
    return values


SEQUENCES = iter(range(1, 1 << 30))  # a fresh sequence id per one-request sequence


def infer(server, model, values: list[np.ndarray], protocol: ModuleType = httpclient, **options):
    """One request through the generated client class, on a fresh client (never shared across threads). A
    stateful model's request is a whole sequence of its own unless ``options`` say otherwise."""
    url = server.http_url.removeprefix("http://") if protocol is httpclient else server.grpc_url
    client = protocol.InferenceServerClient(url)
    if model.stateful and not options:
        options = {"sequence_id": next(SEQUENCES), "start": True, "end": True}
    try:
        request = model.request(*values, caller="tests", protocol=protocol, **options)
        return model.decode(client.infer(request.model_name, request.inputs, outputs=request.outputs,
                                         **request.options))
    finally:
        client.close()


def test_every_compiled_classic_model_loads_and_answers(fleet, dev_plan) -> None:
    server, local, _, client_module = fleet
    compiled = sorted([m.name for m in dev_plan.models if isinstance(m, TritonModelPlan)]
                      + [p.name for p in dev_plan.pipelines])
    assert sorted(m.name for m in local.models) == sorted(m.name for m in client_module.MODELS) == compiled
    assert {m.name: m.source for m in local.models} == {
        "fraud-scorer": "onnx-runner", "image-classification": "ensemble", "image-preprocessor": "artifact",
        "resnet50-classifier": "onnx-runner", "session-recommender": "artifact", "text-embedder": "onnx-runner"}
    rng = np.random.default_rng(0)
    for model in client_module.MODELS:
        batch = 1 if model.stateful else 2  # the sequence batcher takes one request per sequence step
        result = infer(server, model, sample(model, rng, batch=batch))
        for tensor in model.outputs:
            value = getattr(result, tensor.name)
            assert value.shape == (batch, *tensor.dims), (model.name, value.shape)
            assert value.dtype == np.dtype(triton_to_np_dtype(tensor.datatype)), (model.name, value.dtype)
            assert np.isfinite(value).all()


def without_server_defaults(config: mc.ModelConfig, compiled: mc.ModelConfig) -> mc.ModelConfig:
    """Undo the one normalisation tritonserver 2.51 applies to our configs (here and in the cluster alike):
    an unset ``dynamic_batching.preferred_batch_size`` is reported as ``[max_batch_size]``."""
    config = mc.ModelConfig.FromString(config.SerializeToString())
    unset = not compiled.dynamic_batching.preferred_batch_size
    if unset and list(config.dynamic_batching.preferred_batch_size) == [config.max_batch_size]:
        del config.dynamic_batching.preferred_batch_size[:]
    return config


def test_the_server_runs_the_compiled_queue_policy_batching_cache_and_tensors(fleet, dev_plan) -> None:
    """Parsed from the live server, not from our files: only instance_group differs from the compiled config."""
    server, local, _, _ = fleet
    compiled = {path.split("/")[-2]: parse_config(text.decode()) for path, text in render_fleet(dev_plan).items()
                if path.endswith("config.pbtxt")}
    for model in local.models:
        want = compiled[model.name]
        live = without_server_defaults(served_config(server, model.name), want)
        if model.source != "ensemble":  # an ensemble has no instances; Triton reports none
            assert [(g.kind, g.count) for g in live.instance_group] == [
                (mc.ModelInstanceGroup.KIND_CPU, g.count) for g in want.instance_group]
        for field in ("dynamic_batching", "response_cache", "max_batch_size", "input", "output", "backend",
                      "version_policy", "ensemble_scheduling", "model_transaction_policy", "sequence_batching"):
            assert getattr(live, field) == getattr(want, field), (model.name, field)
        planned = dev_plan.model(model.name) if model.source != "ensemble" else None
        if planned is None or planned.sequence is not None:
            continue
        levels = {level: policy.default_timeout_microseconds
                  for level, policy in live.dynamic_batching.priority_queue_policy.items()}
        assert levels == {lv.level: lv.queue_timeout_us for lv in planned.priority_levels}
        if not planned.priority_levels:
            assert live.dynamic_batching.default_queue_policy.default_timeout_microseconds == planned.queue_timeout_us


def test_onnx_models_answer_exactly_like_onnxruntime(fleet) -> None:
    """The served answer is the artifact's own: compare with onnxruntime run directly on the same file."""
    server, _, root, client_module = fleet
    rng = np.random.default_rng(1)
    for model in client_module.MODELS:
        if model.name not in ONNX_MODELS:
            continue
        values = sample(model, rng, batch=3)
        session = ort.InferenceSession(str(root / "acme-ml-models/triton" / model.name / "1" / "model.onnx"),
                                       providers=["CPUExecutionProvider"])
        expected = session.run(None, {t.name: v for t, v in zip(model.inputs, values)})
        result = infer(server, model, values)
        for tensor, want in zip(model.outputs, expected):
            np.testing.assert_allclose(getattr(result, tensor.name), want, rtol=1e-5, atol=1e-6)


def test_preprocessor_decodes_and_normalises_real_images(fleet) -> None:
    """Expected values computed here independently: resize by index sampling, then (x / 255 - mean) / std."""
    server, _, _, client_module = fleet
    model = client_module.ImagePreprocessor
    rng = np.random.default_rng(2)
    exact = rng.integers(0, 256, (224, 224, 3))
    flat = np.full((300, 500, 3), (255, 128, 0))
    grey = rng.integers(0, 256, (112, 112))
    pgm = b"P5 112 112 255\n" + grey.astype(np.uint8).tobytes()
    batch = np.array([[ppm(exact)], [ppm(flat)], [pgm]], dtype=np.object_)
    images = infer(server, model, [batch]).images
    normalise = lambda hwc: ((hwc / 255.0 - MEAN) / STD).transpose(2, 0, 1)  # noqa: E731
    np.testing.assert_allclose(images[0], normalise(exact), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(images[1], normalise(np.full((224, 224, 3), (255, 128, 0))), rtol=1e-5, atol=1e-5)
    upscaled = np.repeat(np.repeat(grey, 2, axis=0), 2, axis=1)
    np.testing.assert_allclose(images[2], normalise(np.stack([upscaled] * 3, axis=-1)), rtol=1e-5, atol=1e-5)


def test_preprocessor_rejects_undecodable_bytes_with_invalid_argument(fleet) -> None:
    server, _, _, client_module = fleet
    with pytest.raises(InferenceServerException, match="image_bytes: not a binary PPM/PGM") as error:
        infer(server, client_module.ImagePreprocessor, [np.array([[b"GIF89a..."]], dtype=np.object_)])
    assert error.value.status() == "400"


def test_repeated_identical_requests_are_served_from_the_response_cache(fleet) -> None:
    server, _, _, client_module = fleet
    model = client_module.FraudScorer
    features = np.random.default_rng(3).standard_normal((1, 64)).astype(np.float32)
    before = scrape_metrics(server.metrics_url)
    answers = [infer(server, model, [features]).fraud_probability for _ in range(5)]
    after = scrape_metrics(server.metrics_url)
    change = {name: metric_value(after, name, model=model.name) - metric_value(before, name, model=model.name)
              for name in ("nv_cache_num_hits_per_model", "nv_cache_num_misses_per_model",
                           "nv_inference_exec_count", "nv_inference_request_success")}
    assert change == {"nv_cache_num_hits_per_model": 4, "nv_cache_num_misses_per_model": 1,
                      "nv_inference_exec_count": 1, "nv_inference_request_success": 5}
    assert all(np.array_equal(a, answers[0]) for a in answers)


def test_generated_client_from_a_thread_pool_over_http_and_grpc(fleet) -> None:
    """The README's usage: one client per call, requests for every model, both protocols.

    On this CPU the real models are slower than the GPU the queue timeouts were compiled for, so a request
    queued behind another model's execution may be rejected (503 / UNAVAILABLE "Request timeout expired"):
    that is the compiled policy working, and the only failure allowed here.
    """
    server, _, _, client_module = fleet

    def work(index: int):
        protocol = httpclient if index % 2 else grpcclient
        model = client_module.MODELS[index % len(client_module.MODELS)]
        try:
            return model, infer(server, model, sample(model, np.random.default_rng(index), batch=1), protocol)
        except InferenceServerException as error:
            assert "Request timeout expired" in str(error), error
            return model, None

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(work, range(24)))
    answered = [(model, result) for model, result in results if result is not None]
    assert len(answered) >= 16, f"only {len(answered)} of 24 answered"
    assert {model.name for model, _ in answered} == {model.name for model in client_module.MODELS}
    for model, result in answered:
        assert [getattr(result, t.name).shape for t in model.outputs] == [(1, *t.dims) for t in model.outputs]


def quiescent_metrics(server, names: tuple[str, ...], seconds: float = 10.0) -> str:
    """The metrics once the success counts of ``names`` no longer move (200 ms apart): statistics of the
    earlier tests' requests may still be on their way (see :func:`settled_successes`)."""
    deadline = time.monotonic() + seconds
    previous = scrape_metrics(server.metrics_url)
    while True:
        time.sleep(0.2)
        current = scrape_metrics(server.metrics_url)
        counts = [[metric_value(m, "nv_inference_request_success", model=n) for n in names]
                  for m in (previous, current)]
        if counts[0] == counts[1] or time.monotonic() >= deadline:
            return current
        previous = current


def settled_successes(server, before, names: tuple[str, ...], expected: int, seconds: float = 10.0) -> dict:
    """Each model's nv_inference_request_success since ``before``, once every one has reached ``expected``
    (or ``seconds`` have passed). A backend reports a request's statistics after it has sent the response,
    and the ensemble its own after the last step's, so the client can have its answer first: on a loaded
    machine the classifier and the ensemble were seen still at 0 right after the answer."""
    deadline = time.monotonic() + seconds
    while True:
        after = scrape_metrics(server.metrics_url)
        counts = {name: metric_value(after, "nv_inference_request_success", model=name)
                  - metric_value(before, "nv_inference_request_success", model=name) for name in names}
        if all(count >= expected for count in counts.values()) or time.monotonic() >= deadline:
            return counts
        time.sleep(0.05)


def test_the_image_pipeline_answers_end_to_end_through_its_ensemble(fleet, dev_plan) -> None:
    """One request to the ensemble runs the preprocessor and the classifier inside the server: its answer is the
    classifier's own on the preprocessor's own output (both called directly here), and each step executed."""
    server, _, _, client_module = fleet
    pipeline = client_module.ImageClassification
    assert [s.model for s in dev_plan.pipeline(pipeline.name).steps] == ["image-preprocessor", "resnet50-classifier"]
    rng = np.random.default_rng(5)
    images = np.array([[ppm(rng.integers(0, 256, (40, 60, 3)))], [ppm(rng.integers(0, 256, (300, 200, 3)))]],
                      dtype=np.object_)
    names = ("image-classification", "image-preprocessor", "resnet50-classifier")
    before = quiescent_metrics(server, names)
    answer = infer(server, pipeline, [images], protocol=grpcclient).probabilities
    steps = settled_successes(server, before, names, expected=1)
    assert steps == {"image-classification": 1, "image-preprocessor": 1, "resnet50-classifier": 1}
    direct = infer(server, client_module.Resnet50Classifier,
                   [infer(server, client_module.ImagePreprocessor, [images]).images]).probabilities
    assert answer.shape == (2, 1000)
    np.testing.assert_allclose(answer, direct, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(answer.sum(axis=1), 1.0, rtol=1e-5)


def test_the_session_recommender_keeps_each_sessions_state(fleet) -> None:
    """Two sessions interleaved: each answer is the mean of that session's items so far (the model's state per
    sequence id), a new START begins afresh, and a request after END without START is refused by Triton."""
    server, _, _, client_module = fleet
    model = client_module.SessionRecommender
    rng = np.random.default_rng(6)
    items = {7001: rng.standard_normal((3, 1, 16)).astype(np.float32),
             7002: rng.standard_normal((3, 1, 16)).astype(np.float32)}
    for step in range(3):
        for session, embeddings in items.items():
            result = infer(server, model, [embeddings[step]], sequence_id=session, start=step == 0, end=step == 2)
            assert result.events.tolist() == [[step + 1]]
            np.testing.assert_allclose(result.session_profile[0], embeddings[: step + 1, 0].mean(axis=0), rtol=1e-5)
    with pytest.raises(InferenceServerException, match="START"):
        infer(server, model, [items[7001][0]], sequence_id=7001)
