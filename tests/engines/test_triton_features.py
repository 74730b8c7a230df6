"""Priority classes, stateful and streaming models on the REAL tritonserver, as the compiler configures them.

A small fleet of its own (FLEET below), compiled for the dev stack and served as ``modelfleet serve`` runs it,
in one server for the module:

* ``ranker`` / ``ranker-fifo``: the same model (the synthetic stand-in: a batch of up to 8 takes the plan's
  compute_ms, sleeping, so the capacity does not depend on how busy this machine's cores are), with and
  without priority classes. Under 3x overload, 20% interactive and 80% batch traffic. Its time constants are
  long (200 ms a batch, p99 1.6 s) so that a stall of this shared 2-core machine (a few hundred ms were seen,
  stalling the load generator too) stays small beside the SLA.
* ``session-recommender``: the example's stateful model.py, released after 1 s idle, two sequence slots.
* ``token-streamer``: a decoupled model sending one response per token; ``long-streamer``: the same model.py,
  profiled for 1-second streams, whose SLA is its first response.
* ``cpu-scorer``: ``device: cpu``, the example's fraud-scorer ONNX artifact on KIND_CPU instances (through the
  onnx runner: this server has no onnxruntime backend); ``cpu-sleeper``: a KIND_CPU stand-in whose batch takes
  1 s, in a pool of its own so that its server's cores are all its instances'.

Timing: the overload assertions compare shares and ratios measured in one run, never absolute times beyond the
compiled SLA itself (which the priority levels must hold with a wide margin: see the test).
"""

from __future__ import annotations

import json
import random
import threading
import time
import warnings
from collections import Counter

import pytest

from tests.engines.conftest import engine_import, require_tritonserver  # noqa: E402

require_tritonserver()
engine_import("triton", "aiohttp")
np = engine_import("triton", "numpy")
httpclient = engine_import("triton", "tritonclient.http")
grpcclient = engine_import("triton", "tritonclient.grpc")

from tritonclient.utils import InferenceServerException  # noqa: E402

from modelfleet.engines.loadgen import NO_ANSWER, OK, TIMEOUT, infer_body, open_loop, percentile  # noqa: E402
from modelfleet.plan.compiler import compile_fleet  # noqa: E402
from modelfleet.render.client import render_client  # noqa: E402
from modelfleet.spec.load import parse_fleet_text  # noqa: E402
from tests.conftest import ROOT  # noqa: E402
from tests.engines.conftest import SESSIONS, load_module, make_artifact_root, served, served_config  # noqa: E402

pytestmark = pytest.mark.engine

RANKER = """
  - name: {name}
    type: other
    framework: python
    artifact: s3://acme-ml-models/triton/{name}
    size: {{memory_gib: 0.1}}
    deterministic: false          # every request executes: no response cache
    handles_cancellation: true
    inputs: [{{name: features, dtype: fp32, dims: [4]}}]
    outputs: [{{name: score, dtype: fp32, dims: [1]}}]
    sla:
      p99_latency_ms: 1600        # 8 batch times: a stall of this shared machine is small beside it
      peak_rps: 20{priorities}
    profile: {{rps_per_instance: 40, compute_ms: 200, measured_on: t4}}
    overrides: {{max_batch_size: 8}}
"""
PRIORITIES = """
      priorities:
        interactive: {share: 0.2}
        batch: {share: 0.8, p99_latency_ms: 3000}"""
FLEET = "models:" + RANKER.format(name="ranker", priorities=PRIORITIES) + RANKER.format(name="ranker-fifo",
                                                                                        priorities="") + """
  - name: session-recommender
    type: recommender
    framework: python
    artifact: s3://acme-ml-models/triton/session-recommender
    size: {memory_gib: 0.2}
    handles_cancellation: true
    stateful: {idle_timeout_ms: 1000, max_sequences: 2, strategy: direct}
    inputs: [{name: item_embedding, dtype: fp32, dims: [16]}]
    outputs: [{name: session_profile, dtype: fp32, dims: [16]}, {name: events, dtype: int32, dims: [1]}]
    sla: {p99_latency_ms: 50, peak_rps: 10}
    profile: {rps_per_instance: 3000, compute_ms: 2}
    overrides: {max_batch_size: 2}
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
  - name: long-streamer
    type: other
    framework: python
    artifact: s3://modelfleet-tests/token-streamer
    size: {memory_gib: 0.1}
    streaming: true
    handles_cancellation: true
    inputs: [{name: count, dtype: int32, dims: [1]}]
    outputs: [{name: token, dtype: int32, dims: [1]}]
    sla: {p99_latency_ms: 2500, peak_rps: 0.1}
    # streams of up to 200 tokens, 5 ms apart: 1 whole stream a second; the first token after 5 ms
    profile: {rps_per_instance: 1, compute_ms: 5, measured_on: l40s}  # the GPU dev packs these models onto
    overrides: {max_batch_size: 1}
  - name: cpu-scorer
    type: tabular
    framework: onnx
    device: cpu
    artifact: s3://acme-ml-models/triton/fraud-scorer
    size: {memory_gib: 0.3}
    inputs: [{name: features, dtype: fp32, dims: [64]}]
    outputs: [{name: fraud_probability, dtype: fp32, dims: [1]}]
    sla: {p99_latency_ms: 20, peak_rps: 100}
    profile: {cpu: {rps_per_instance: 5000, compute_ms: 5, measured_on: c7i, vcpu_per_instance: 1}}
  - name: cpu-sleeper
    type: other
    framework: python
    device: cpu
    pool: cpu-sleepers
    artifact: s3://modelfleet-tests/cpu-sleeper
    size: {memory_gib: 0.1}
    deterministic: false
    handles_cancellation: true
    inputs: [{name: x, dtype: fp32, dims: [1]}]
    outputs: [{name: y, dtype: fp32, dims: [1]}]
    sla: {p99_latency_ms: 5000, peak_rps: 1}
    profile: {cpu: {rps_per_instance: 1, compute_ms: 1000, measured_on: c7i}}
    overrides: {max_batch_size: 1}
"""
OVERLOAD = 3.0  # x what one instance of the ranker executes per second
SECONDS = 8.0  # of offered load (then the queues drain within the batch class's timeout)
INTERACTIVE_SHARE = 0.2


@pytest.fixture(scope="module")
def plan(project):
    return compile_fleet(parse_fleet_text(FLEET), project.environment("dev"), project.catalogue())


@pytest.fixture(scope="module")
def features(plan, tmp_path_factory: pytest.TempPathFactory):
    """(server, generated client module) with every model of FLEET loaded."""
    import shutil

    tmp = tmp_path_factory.mktemp("features")
    root = tmp / "artifacts"
    shutil.copytree(ROOT / "examples/s3" / SESSIONS, root / SESSIONS, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests/engines/artifacts/token-streamer", root / "modelfleet-tests/token-streamer")
    make_artifact_root(root, ("fraud-scorer",), preprocessor=False)  # the ONNX artifact cpu-scorer serves
    (tmp / "features_client.py").write_text(render_client(plan))
    client = load_module(tmp / "features_client.py", "features_client")
    with served(plan, root, tmp / "work") as (server, local):
        assert {m.name: m.source for m in local.models} == {
            "ranker": "synthetic", "ranker-fifo": "synthetic", "session-recommender": "artifact",
            "token-streamer": "artifact", "long-streamer": "artifact", "cpu-scorer": "onnx-runner",
            "cpu-sleeper": "synthetic"}
        yield server, client


# ---------------------------------------------------------------------------------------------- priorities
def capacity_rps(model) -> float:
    """What the stand-in executes per second: a full batch per max(compute_ms, batch / rps_per_instance)."""
    batch_s = max(model.compute_ms / 1000, model.max_batch_size / model.rps_per_instance)
    return model.max_batch_size / batch_s * model.instance_count


def overload(server, model, levels: dict[str, int] | None) -> dict[str, list]:
    """3x the model's capacity for SECONDS, 20% interactive / 80% batch in a fixed random order; the samples
    by class. ``levels``: the priority each class sends, as the generated client maps its ``priority=`` names
    (None: no priority, the FIFO control)."""
    rate = OVERLOAD * capacity_rps(model)
    count = int(rate * SECONDS)
    order = random.Random(14).choices(["interactive", "batch"], [INTERACTIVE_SHARE, 1 - INTERACTIVE_SHARE], k=count)
    bodies = []
    for index, kind in enumerate(order):
        body = json.loads(infer_body(model, index))
        if levels is not None:
            body["parameters"]["priority"] = levels[kind]
        bodies.append(json.dumps(body).encode())
    samples = open_loop(server.http_url, model.name, bodies, rate, timeout_s=NO_ANSWER_AFTER_S)
    return {kind: [s for s, k in zip(samples, order) if k == kind] for kind in ("interactive", "batch")}


# tritonserver 2.51's HTTP frontend now and then never answers a few requests under overload on a loaded
# machine (docs/engines.md, "Engine defects that shape the tests"; tests/engines/test_overload.py): they are
# given up after this long, counted, bounded and left out of the shares.
NO_ANSWER_AFTER_S = 20.0
MAX_NO_ANSWER_SHARE = 0.15


def rejected(samples: list) -> float:
    """The share of the answered requests that the queue timeouts rejected."""
    outcomes = Counter(s.outcome for s in samples)
    assert set(outcomes) <= {OK, TIMEOUT, NO_ANSWER}, outcomes  # shed by the queue timeouts, nothing else went wrong
    assert outcomes[NO_ANSWER] <= MAX_NO_ANSWER_SHARE * len(samples), outcomes
    if outcomes[NO_ANSWER]:
        warnings.warn(f"tritonserver 2.51 never answered {outcomes[NO_ANSWER]} of {len(samples)} requests")
    return outcomes[TIMEOUT] / (outcomes[OK] + outcomes[TIMEOUT])


@pytest.fixture(scope="module")
def overloaded(features, plan):
    """The levels each class sends are the generated client's (``Ranker.priorities``, what ``request(...,
    priority=name)`` puts in ``Request.options``), so the proof covers the client's mapping too."""
    server, client_module = features
    ranker, fifo = plan.model("ranker"), plan.model("ranker-fifo")
    request = client_module.Ranker.request(np.zeros((1, 4), np.float32), caller="tests", priority="interactive")
    assert request.options["priority"] == 1  # the tightest class is Triton's level 1
    return overload(server, ranker, dict(client_module.Ranker.priorities)), overload(server, fifo, None)


def test_under_overload_the_low_priority_is_rejected_first(overloaded, plan) -> None:
    """With priority levels, batch traffic absorbs the overload: its rejected share is high and the interactive
    share's a small fraction of it. The FIFO control (same model, same load, no levels) rejects both classes
    alike, so the difference is the priority levels' doing."""
    prioritised, fifo = overloaded
    interactive, batch = rejected(prioritised["interactive"]), rejected(prioritised["batch"])
    control = rejected(fifo["interactive"]), rejected(fifo["batch"])
    assert batch >= 0.5, (interactive, batch)  # 3x overload: most of the batch class cannot be served
    assert interactive <= 0.2 * batch, (interactive, batch)
    assert control[0] >= 0.5 * control[1], control  # without levels the interactive class is shed like batch
    assert interactive <= 0.2 * control[0], (interactive, control)


def test_the_low_priority_is_shed_before_any_high_priority_request(overloaded) -> None:
    """First in the order the load arrives: as the overload builds, the first requests refused are batch
    ones, and an interactive request (if any is refused at all) only after batch shedding began."""
    prioritised, _ = overloaded
    first = {kind: min((s.due_s for s in samples if s.outcome == TIMEOUT), default=None)
             for kind, samples in prioritised.items()}
    assert first["batch"] is not None, first
    assert first["interactive"] is None or first["interactive"] > first["batch"], first


def test_the_high_prioritys_accepted_p99_stays_within_its_sla(overloaded, plan) -> None:
    """Latency from each request's scheduled send time (the open loop's clock, so a late client cannot hide
    queueing). The interactive class asks for 60% of the capacity, so the levels should serve it in about two
    batch times; its compiled SLA is the bound asserted, and is several batch times away."""
    prioritised, _ = overloaded
    model = plan.model("ranker")
    interactive = model.priority_levels[0]
    answered = [s.latency_s for s in prioritised["interactive"] if s.outcome == OK]
    assert len(answered) >= 0.8 * len(prioritised["interactive"])
    assert percentile(answered, 99) * 1000 <= interactive.p99_latency_ms, percentile(answered, 99)


# ---------------------------------------------------------------------------------------------- stateful
def send(server, client_module, embedding, session: int, **flags):
    model = client_module.SessionRecommender
    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    try:
        request = model.request(np.asarray(embedding, np.float32).reshape(1, 16), caller="tests",
                                sequence_id=session, **flags)
        return model.decode(client.infer(request.model_name, request.inputs, outputs=request.outputs,
                                         **request.options))
    finally:
        client.close()


def test_a_stateful_model_keeps_per_sequence_state(features) -> None:
    server, client_module = features
    items = np.random.default_rng(9).standard_normal((2, 4, 16)).astype(np.float32)
    for step in range(4):
        for session in (0, 1):
            result = send(server, client_module, items[session, step], 501 + session, start=step == 0, end=step == 3)
            assert result.events.tolist() == [[step + 1]]
            np.testing.assert_allclose(result.session_profile[0], items[session, : step + 1].mean(axis=0), rtol=1e-5)


def test_idle_sequences_are_released(features, plan) -> None:
    """Two live sequences hold both slots; a third waits for one until the idle ones are released, about the
    compiled idle timeout later; then an old sequence's next request must START again."""
    server, client_module = features
    sequence = plan.model("session-recommender").sequence
    assert sequence.slots == 2 and sequence.idle_timeout_us == 1_000_000
    item = np.ones(16, np.float32)
    send(server, client_module, item, 601, start=True)
    send(server, client_module, item, 602, start=True)
    started = time.monotonic()
    third = threading.Thread(target=send, args=(server, client_module, item, 603), kwargs={"start": True})
    third.start()
    third.join(timeout=30)
    waited = time.monotonic() - started
    assert not third.is_alive()
    assert waited >= 0.8 * sequence.idle_timeout_us / 1e6, waited  # no slot until an idle sequence was released
    with pytest.raises(InferenceServerException, match="START"):
        send(server, client_module, item, 601)


# ---------------------------------------------------------------------------------------------- streaming
def test_a_streaming_model_returns_several_responses_to_one_request(features) -> None:
    server, client_module = features
    model = client_module.TokenStreamer
    assert model.streaming
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        request = model.request(np.array([[6]], np.int32), caller="tests", protocol=grpcclient)
        responses = client_module.stream(client, request, timeout_s=30)
    finally:
        client.close()
    assert [model.decode(r).token.tolist() for r in responses] == [[[t]] for t in range(6)]


def _streams(server, model, count: int) -> dict:
    """Open a gRPC stream and send one request for ``count`` tokens; the returned record fills in as responses
    arrive (monotonic times), with ``done`` set on the final response or an error."""
    record = {"sent": 0.0, "arrivals": [], "errors": [], "done": threading.Event()}

    def on_response(result, error) -> None:
        if error is not None:
            record["errors"].append(str(error))
            record["done"].set()
            return
        record["arrivals"].append(time.monotonic())
        if result.get_response().parameters["triton_final_response"].bool_param:
            record["done"].set()

    request = model.request(np.array([[count]], np.int32), caller="tests", protocol=grpcclient)
    options = dict(request.options)  # tritonclient takes a stream's headers when it starts, not per request
    client = grpcclient.InferenceServerClient(server.grpc_url)
    client.start_stream(callback=on_response, headers=options.pop("headers", None))
    record["sent"], record["client"] = time.monotonic(), client
    client.async_stream_infer(request.model_name, request.inputs, outputs=request.outputs,
                              enable_empty_final_response=True, **options)
    return record


def test_a_streaming_models_sla_is_its_first_response_behind_a_whole_stream(features, plan) -> None:
    """The SLA of a streaming model is its first response. A request waits behind the batch in progress, which
    holds the instance for its whole streams (1 s here: 200 tokens 5 ms apart, the profile's 1 stream/s), then
    counts only to its own first token: queue timeout = p99 2,500 - 1,000 - 5 = 1,495 ms. Charged its own
    whole stream too (2 x 1,000 ms, as before), the timeout was 500 ms, and this server rejects a request still
    queued after that: it holds a request in its queue while the instance streams (measured: the wait counts
    inside the timeout). On the real server, the second request, sent while the first streams, is answered:
    after the whole first stream, its first token within its 2.5 s p99, and its stream in full."""
    server, client_module = features
    compiled = plan.model("long-streamer")
    assert (compiled.instance_type.split(".")[0], compiled.compute_ms, compiled.queue_timeout_us) == ("g6e", 1000, 1_495_000)
    old_timeout_ms = compiled.p99_latency_ms - 2 * compiled.compute_ms  # 500 ms: a whole stream charged twice
    for _ in range(3):
        first, second = _stream_behind_a_stream(server, client_module)
        # The second request is sent when the first stream's first token reaches the client; on a loaded machine
        # that can be late in the stream (seen: 813 ms of it left, not about 1,000). The run tells only if what
        # was left of the first stream exceeded the old timeout with a margin; otherwise it is run again.
        if (first["arrivals"][-2] - second["sent"]) * 1000 > old_timeout_ms + 100:
            break
    else:
        pytest.fail("three runs in a row sent the second request too late in the first stream to tell")
    waited_ms = (second["arrivals"][0] - second["sent"]) * 1000
    assert second["arrivals"][0] >= first["arrivals"][-2]  # answered after the whole first stream...
    assert waited_ms > old_timeout_ms, waited_ms  # ...queued longer than the old timeout would have allowed...
    assert waited_ms <= compiled.p99_latency_ms, waited_ms  # ...and its first token within its p99


def _stream_behind_a_stream(server, client_module) -> tuple[dict, dict]:
    """A 200-token stream, and a 5-token request sent as soon as the first stream's first token arrives: both
    complete, without errors, every token and the final response received."""
    first = _streams(server, client_module.LongStreamer, 200)
    try:
        deadline = time.monotonic() + 30
        while not first["arrivals"] and time.monotonic() < deadline:  # the first stream holds the instance
            time.sleep(0.01)
        second = _streams(server, client_module.LongStreamer, 5)
        try:
            assert second["done"].wait(60) and first["done"].wait(60)
        finally:
            second["client"].stop_stream()
            second["client"].close()
    finally:
        first["client"].stop_stream()
        first["client"].close()
    assert not first["errors"] and not second["errors"], (first["errors"], second["errors"])
    assert len(first["arrivals"]) == 201 and len(second["arrivals"]) == 6  # every token, then the final response
    return first, second


# ---------------------------------------------------------------------------------------------- KIND_CPU
def test_a_kind_cpu_model_is_served_as_compiled(features, plan, tmp_path) -> None:
    """The compiled KIND_CPU instances and their thread count are what the server runs (no adaptation: the
    local server changes KIND_GPU only), and the model answers exactly what onnxruntime answers on its file."""
    from tritonclient.grpc import model_config_pb2 as mc

    server, client_module = features
    model = plan.model("cpu-scorer")
    assert (model.device, model.gpus_per_replica) == ("cpu", 0) and model.instance_type.startswith("c7i.")
    live = served_config(server, "cpu-scorer")
    assert [(g.kind, g.count) for g in live.instance_group] == [(mc.ModelInstanceGroup.KIND_CPU, model.instance_count)]
    assert live.parameters["intra_op_thread_count"].string_value == str(model.cpu_cores // model.instance_count)
    ort = engine_import("triton", "onnxruntime")
    artifact = make_artifact_root(tmp_path, ("fraud-scorer",), preprocessor=False)
    session = ort.InferenceSession(str(artifact / "acme-ml-models/triton/fraud-scorer/1/model.onnx"),
                                   providers=["CPUExecutionProvider"])
    features_in = np.random.default_rng(3).standard_normal((4, 64)).astype(np.float32)
    client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
    try:
        request = client_module.CpuScorer.request(features_in, caller="tests")
        result = client_module.CpuScorer.decode(client.infer(request.model_name, request.inputs,
                                                             outputs=request.outputs, **request.options))
    finally:
        client.close()
    (expected,) = session.run(None, {"features": features_in})
    np.testing.assert_allclose(result.fraud_probability, expected, rtol=1e-5, atol=1e-6)


def test_kind_cpu_instances_run_side_by_side(features, plan) -> None:
    """The instance count is real: the compiled instances (2 here, the c7i node's usable cores) each run a
    batch at once, so two requests of a 1 s batch each finish in about 1 s, not the 2 s one instance takes."""
    server, client_module = features
    sleeper = plan.model("cpu-sleeper")
    assert (sleeper.instance_count, sleeper.max_batch_size, sleeper.compute_ms) == (2, 1, 1000)

    def call(_: int) -> None:
        client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        try:
            request = client_module.CpuSleeper.request(np.zeros((1, 1), np.float32), caller="tests")
            client.infer(request.model_name, request.inputs, outputs=request.outputs, **request.options)
        finally:
            client.close()

    started = time.monotonic()
    workers = [threading.Thread(target=call, args=(i,)) for i in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=30)
    elapsed = time.monotonic() - started
    assert elapsed < 1.6 * sleeper.compute_ms / 1000, elapsed  # one instance would take 2 x 1 s
