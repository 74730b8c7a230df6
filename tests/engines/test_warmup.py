"""Warmup (#15) on the real tritonserver: the README's client burst (100 requests of 4 x 64 features to
fraud-scorer from 8 threads, through the generated client) at a FRESH server.

The server is what ``modelfleet serve --stack dev`` runs (the compiled flags and config.pbtxt, the real ONNX
artifact), narrowed to fraud-scorer, and started anew for every run. Two arms, fresh servers each:

- the compiled config, with ``model_warmup``: the first burst of the typical (median) fresh server has no
  rejection;
- the same config with ``model_warmup`` removed (the control): the first burst has rejections (measured here:
  3, 7, 5, 8, 1 and 3 of 100 on six fresh servers; later bursts none), so the burst measures the cold start
  and the test fails without warmup.

A run counts when its warm bursts (the second and third) had no rejection: a warm burst with rejections
means this 2-core machine was too busy for fraud-scorer's 11 ms queue timeout, and that run's cold burst
says nothing about warmup. With the whole dev fleet on the server (``modelfleet serve`` as the README runs
it) a fresh server still rejected 1 to 9 of its first 100 in some runs here while other work shared the
machine; that residue is not fraud-scorer's cold start (docs/operations/day-two.md).
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from tests.engines.client_threads import ClientThreads
from tests.engines.conftest import engine_import, load_module, make_artifact_root, require_tritonserver

require_tritonserver()
np = engine_import("triton", "numpy")
httpclient = engine_import("triton", "tritonclient.http")

from tritonclient.utils import InferenceServerException  # noqa: E402

from modelfleet.render.client import render_client  # noqa: E402

pytestmark = pytest.mark.engine

MODEL = "fraud-scorer"
RUNS = 5  # counted fresh servers wanted per arm
MIN_RUNS = 3  # counted fresh servers needed per arm (a median of three still tells)
MAX_SERVERS = 12  # fresh servers tried per arm for them (about 8 s each)


def readme_burst(client_module, url: str, seed: int) -> int:
    """The README's example, as written there: one client per thread, 100 batches of 4; the rejections."""
    def score(client, features):
        request = client_module.FraudScorer.request(features, caller="warmup-test")
        try:
            result = client.infer(request.model_name, request.inputs, outputs=request.outputs, **request.options)
        except InferenceServerException as error:
            assert "timeout" in str(error).lower(), error  # a rejection; anything else is a failure
            return None
        return client_module.FraudScorer.decode(result).fraud_probability

    rng = np.random.default_rng(seed)
    batches = [rng.random((4, 64), dtype=np.float32) for _ in range(100)]
    with ClientThreads(8, lambda: httpclient.InferenceServerClient(url)) as threads:
        scores = threads.map(score, batches)
    return sum(s is None for s in scores)


def fresh_server_bursts(plan, root: Path, workdir: Path, client_module, warmup: bool) -> list[int]:
    """Three bursts at a server started anew for fraud-scorer as compiled (``warmup``: keep its model_warmup)."""
    from modelfleet.commands.serve import available_backends
    from modelfleet.engines.tritonserver import LocalTritonServer, find_tritonserver, prepare_backends
    from modelfleet.serve import plan_local_repository, write_local_repository

    install = find_tritonserver()
    local = plan_local_repository(plan, root, available_backends(install), (plan.model(MODEL).server,))
    local = dataclasses.replace(local, models=tuple(m for m in local.models if m.name == MODEL))
    backends = prepare_backends(install, workdir)
    repository = write_local_repository(local, workdir / "repository", backends)
    config = repository / MODEL / "config.pbtxt"
    assert "model_warmup" in config.read_text()
    if not warmup:
        config.write_text(re.sub(r"model_warmup \{.*?\n\}\n", "", config.read_text(), flags=re.S))
    with LocalTritonServer(repository, local.server_args, workdir=workdir, install=install, backends=backends,
                           expected_models=[MODEL], stop_timeout=local.exit_timeout_secs + 5.0) as server:
        url = server.http_url.removeprefix("http://")
        warm_the_client(url)
        return [readme_burst(client_module, url, seed=i) for i in range(3)]


def warm_the_client(url: str) -> None:
    """The client side's own first use (8 threads, their connections, tritonclient's first request), on the
    health endpoint: the server's model stays cold. On 2 cores a cold client competes with the server for the
    first burst's milliseconds (seen: all 8 threads' first requests rejected together), which is the test's
    machine, not the server's cold start."""
    with ClientThreads(8, lambda: httpclient.InferenceServerClient(url)) as threads:
        assert all(threads.map(lambda client, _: client.is_server_live(), range(8)))


def counted(runs: list[list[int]]) -> list[list[int]]:
    return [bursts for bursts in runs if not any(bursts[1:])]


@pytest.mark.parametrize("warmup", [True, False], ids=["compiled", "control-without-warmup"])
def test_a_fresh_server_answers_the_readme_burst_without_rejections(project, dev_plan, tmp_path: Path, warmup) -> None:
    # the one client of every stack (README: `modelfleet client`), used against the dev stack's server
    (tmp_path / "fleet_client.py").write_text(render_client([project.plan(s) for s in ("dev", "prod", "staging")]))
    client_module = load_module(tmp_path / "fleet_client.py", f"fleet_client_warmup_{warmup}")
    root = make_artifact_root(tmp_path / "s3", (MODEL,), preprocessor=False)
    runs: list[list[int]] = []
    while len(counted(runs)) < RUNS and len(runs) < MAX_SERVERS:
        workdir = tmp_path / f"work-{len(runs)}"
        workdir.mkdir()
        runs.append(fresh_server_bursts(dev_plan, root, workdir, client_module, warmup))
    # On a loaded CI machine (seen: 4 of 10 servers counted, six had warm bursts with rejections) the
    # wanted five are not always there; three counted runs still give a median.
    assert len(counted(runs)) >= MIN_RUNS, f"the machine is too busy to measure warmup: {runs}"
    cold = sorted(bursts[0] for bursts in counted(runs))
    median = cold[len(cold) // 2]
    # The typical fresh server, by the median: with warmup it rejects nothing; without, it rejects some (the
    # control shows the burst can tell). Not every warmed one: about one run in eight still had all 8 threads'
    # first requests rejected together while other work loaded this 2-core machine (the server's own cold start
    # is gone by the control's measure; what delays its scheduler then is the machine).
    assert (median == 0) if warmup else (median > 0), runs


def test_the_compiled_configs_warm_up_every_power_of_two_batch(dev_plan) -> None:
    from modelfleet.render.triton import model_config

    config = model_config(dev_plan.model(MODEL))
    assert config.max_batch_size == 128
    assert [(w.batch_size, w.count) for w in config.model_warmup] == [(2**i, 2) for i in range(8)]
    assert dict(config.model_warmup[0].inputs)["features"].zero_data


# ---------------------------------------------------------------------------------------------- every model warms up
FLEET_ONNX_MODELS = ("fraud-scorer", "resnet50-classifier", "text-embedder")
WARMUP_RAN = "model '{name}' instance {name}_0_0 is running warmup sample 'batch-1' for iteration 1"


def test_every_triton_model_of_the_example_fleet_warms_up_on_the_real_server(dev_plan, tmp_path: Path) -> None:
    """The whole dev fleet as `modelfleet serve` runs it: every Triton model (ensembles have no warmup) logs its
    warmup running, the image-preprocessor with the PPM sample models.yaml names, and every model loads (a
    failed warmup fails its load: the control below)."""
    from modelfleet.plan.types import TritonModelPlan
    from tests.engines.conftest import served

    root = make_artifact_root(tmp_path / "s3", FLEET_ONNX_MODELS, preprocessor=True)
    with served(dev_plan, root, tmp_path / "work", extra_args=("--log-verbose=1",)) as (server, local):
        log = server.log_path.read_text()
    names = [m.name for m in dev_plan.models if isinstance(m, TritonModelPlan)]
    assert "image-preprocessor" in names and len(names) >= 5
    assert [n for n in names if WARMUP_RAN.format(name=n) not in log] == []


def test_a_sample_the_model_cannot_decode_fails_its_load(dev_plan, tmp_path: Path) -> None:
    """The control: the preprocessor's shipped sample replaced by bytes that are no image. Its warmup runs the
    model's own decoder, which rejects them, and the server refuses to load the model: so the passing run above
    decoded the sample (it is not skipped, and it is not zeros).

    How the server fails is tritonserver 2.51's: measured here, it either exits 1 ("failed to load all models",
    the model's own error in the log) or is killed by SIGSEGV right after logging the failed warmup sample (3 of
    9 runs), while it discards the batch's other warmup requests. Both are a failed start (a pod would crash-loop
    either way), and the log line naming the failed sample comes first in both: that is what is asserted."""
    import struct

    from modelfleet.commands.serve import available_backends
    from modelfleet.engines.tritonserver import EngineStartError, LocalTritonServer, find_tritonserver, prepare_backends
    from modelfleet.serve import plan_local_repository, write_local_repository

    install = find_tritonserver()
    root = make_artifact_root(tmp_path / "s3", (), preprocessor=True)
    local = plan_local_repository(dev_plan, root, available_backends(install), ())
    local = dataclasses.replace(local, models=tuple(m for m in local.models if m.name == "image-preprocessor"))
    backends = prepare_backends(install, tmp_path)
    repository = write_local_repository(local, tmp_path / "repository", backends)
    sample = repository / "image-preprocessor" / "warmup" / "image_bytes"
    assert sample.read_bytes()[4:6] == b"P6"  # Triton's string serialisation: a 4-byte length, then the PPM
    sample.write_bytes(struct.pack("<I", 12) + b"not an image")
    with pytest.raises(EngineStartError) as failed:
        with LocalTritonServer(repository, [*local.server_args, "--log-verbose=1"], workdir=tmp_path, install=install, backends=backends,
                               expected_models=["image-preprocessor"], startup_timeout=60):
            pass
    log = (tmp_path / "tritonserver.log").read_text()
    assert "is running warmup sample 'batch-1' for iteration 1" in log, failed.value
    assert "instance image-preprocessor_0_0 failed to run warmup sample 'batch-1'" in log, failed.value
    assert "successfully loaded 'image-preprocessor'" not in log
