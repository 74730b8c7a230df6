"""Versions on the real tritonserver: the generated client calls a named version, an ensemble calls the
version its step pins (not the newest), and a held A/B split sends its share to the second version, counted
per version by Triton's own metrics; with a model serving versions 1 and 2 at once (``versions: [1, 2]``).

versioned-scaler version N answers N x its input (tests/engines/artifacts/versioned-scaler), so every answer
says which version computed it."""

from __future__ import annotations

import shutil

import pytest

from modelfleet.errors import SpecError
from modelfleet.plan.compiler import compile_fleet
from modelfleet.render.client import render_client
from modelfleet.spec.load import parse_fleet_text
from tests.conftest import ROOT
from tests.engines.conftest import engine_import, load_module, require_tritonserver, served

require_tritonserver()
np = engine_import("triton", "numpy")
httpclient = engine_import("triton", "tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402

pytestmark = pytest.mark.engine

MODEL = """
  - name: versioned-scaler
    type: other
    framework: python
    artifact: s3://modelfleet-tests/versioned-scaler
    versions: [1, 2]
    ab_split: {versions: [1, 2], share: 0.25}
    size: {memory_gib: 0.1}
    deterministic: false
    handles_cancellation: true
    inputs: [{name: x, dtype: fp32, dims: [1]}]
    outputs: [{name: y, dtype: fp32, dims: [1]}]
    sla: {p99_latency_ms: 2000, peak_rps: 1}
    profile: {rps_per_instance: 100, measured_on: cpu, compute_ms: 5}
"""
PIPELINE = """pipelines:
  - name: scaled-once
    inputs: [{name: x, dtype: fp32, dims: [1]}]
    outputs: [{name: y, dtype: fp32, dims: [1], from: versioned-scaler.y}]
    steps:
      - {model: versioned-scaler, inputs: {x: x}, version: 1}
    sla: {p99_latency_ms: 3000, peak_rps: 1}
"""


@pytest.fixture(scope="module")
def versions(project, tmp_path_factory: pytest.TempPathFactory):
    plan = compile_fleet(parse_fleet_text(PIPELINE + "models:" + MODEL), project.environment("dev"),
                         project.catalogue())
    tmp = tmp_path_factory.mktemp("versions")
    shutil.copytree(ROOT / "tests/engines/artifacts/versioned-scaler", tmp / "s3/modelfleet-tests/versioned-scaler")
    (tmp / "versions_client.py").write_text(render_client(plan))
    client = load_module(tmp / "versions_client.py", "versions_client")
    with served(plan, tmp / "s3", tmp / "work") as (server, local):
        assert {m.name: m.source for m in local.models} == {"versioned-scaler": "artifact", "scaled-once": "ensemble"}
        yield server, client


def call(server, client_class, x: float, **options) -> float:
    request = client_class.request(np.array([[x]], np.float32), caller="version-test", **options)
    result = httpclient.InferenceServerClient(server.http_url.removeprefix("http://")).infer(
        request.model_name, request.inputs, outputs=request.outputs, **request.options)
    return float(client_class.decode(result).y[0, 0])


def test_the_client_calls_the_version_it_names(versions) -> None:
    server, client = versions
    assert client.VersionedScaler.versions == (1, 2)
    assert call(server, client.VersionedScaler, 3.0, version=1) == 3.0
    assert call(server, client.VersionedScaler, 3.0, version=2) == 6.0
    with pytest.raises(ValueError, match=r"version 3, expected 1, 2"):
        client.VersionedScaler.request(np.array([[1.0]], np.float32), caller="version-test", version=3)


def test_the_server_itself_refuses_a_version_it_does_not_serve(versions) -> None:
    """The client's check mirrors the server's: a request built by hand for version 3 fails there."""
    server, _ = versions
    inputs = [httpclient.InferInput("x", [1, 1], "FP32")]
    inputs[0].set_data_from_numpy(np.array([[1.0]], np.float32))
    with pytest.raises(InferenceServerException, match=r"(?i)version"):
        httpclient.InferenceServerClient(server.http_url.removeprefix("http://")).infer(
            "versioned-scaler", inputs, model_version="3")


def test_the_ensemble_calls_the_version_its_step_pins_not_the_newest(versions) -> None:
    server, client = versions
    assert call(server, client.ScaledOnce, 3.0) == 3.0  # version 1 (x 1), although 2 is served and newer


def test_an_ensemble_over_a_model_of_several_versions_must_name_one() -> None:
    unnamed = PIPELINE.replace(", version: 1}", "}")
    with pytest.raises(SpecError) as exc:
        parse_fleet_text(unnamed + "models:" + MODEL)
    issue = next(i for i in exc.value.issues if i.path == "pipelines[0].steps[0].model")
    assert "serves versions 1, 2" in issue.message and "version: 2" in issue.fix
    with pytest.raises(SpecError) as exc:
        parse_fleet_text(PIPELINE.replace("version: 1", "version: 5") + "models:" + MODEL)
    assert any(i.path == "pipelines[0].steps[0].version" and "not 5" in i.message for i in exc.value.issues)


SPLIT_REQUESTS = 200


def test_a_held_split_sends_its_share_to_the_second_version_counted_per_version(versions, project) -> None:
    """200 requests naming no version, each with its own split key: each key's side is fixed by its hash, so
    the count on version 2 is known before sending (about 25%); Triton's per-version counters and the A/B row
    of the server's dashboard see exactly it."""
    server, client = versions
    model = client.VersionedScaler
    assert model.ab_split == (1, 2, 0.25)
    keys = [f"user-{i}" for i in range(SPLIT_REQUESTS)]
    answers = [call(server, model, 1.0, split_key=key) for key in keys]
    expected = [2.0 if client._split(model, key) == 2 else 1.0 for key in keys]
    assert answers == expected and answers == [call(server, model, 1.0, split_key=k) for k in keys[:20]] + answers[20:]
    on_candidate = answers.count(2.0)
    assert 0.15 * SPLIT_REQUESTS < on_candidate < 0.35 * SPLIT_REQUESTS, on_candidate  # the share, 25% +- 5 sigma-ish
    metrics = scrape(server)
    success = {v: metric(metrics, "nv_inference_request_success", version=v) for v in ("1", "2")}
    # the 20 repeated keys and the 6 calls of the other tests also count
    assert success["2"] >= on_candidate and success["1"] >= SPLIT_REQUESTS - on_candidate


def test_the_ab_row_of_the_dashboard_asks_for_series_the_real_server_exports(versions, project) -> None:
    from modelfleet.render.observability.dashboards import triton_server_dashboard
    from tests.observability.metric_names import by_source, exported, names_in

    server, _ = versions
    plan = compile_fleet(parse_fleet_text(PIPELINE + "models:" + MODEL), project.environment("dev"),
                         project.catalogue())
    (triton,) = [s for s in plan.triton_servers if "versioned-scaler" in s.models]
    dashboard = triton_server_dashboard(plan, triton)
    (row,) = [r for r in dashboard.rows if "A/B" in r.title]
    assert row.title == "versioned-scaler: A/B, version 1 vs 2 (25%)"
    used = by_source(names_in(q.expr for p in row.panels for q in p.queries))["triton"]
    assert used and used - exported(scrape(server)) == set()
    assert all('version="1"' in p.queries[0].expr and 'version="2"' in p.queries[1].expr for p in row.panels)


def scrape(server) -> str:
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(server.metrics_url, timeout=10) as response:
        return response.read().decode()


def metric(text: str, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples carrying ``labels``."""
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") and all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


@pytest.mark.parametrize("split, words", [
    ("{versions: [1, 3], share: 0.1}", "version 3 is not served"),
    ("{versions: [2, 2], share: 0.1}", "both sides are version 2"),
    ("{versions: [1, 2], share: 1.0}", "less than 1"),
])
def test_a_split_the_model_cannot_hold_is_a_located_error(split, words) -> None:
    text = "models:" + MODEL.replace("{versions: [1, 2], share: 0.25}", split)
    with pytest.raises(SpecError) as exc:
        parse_fleet_text(text)
    assert any(i.path.startswith("models[0].ab_split") and words in i.message for i in exc.value.issues), exc.value
