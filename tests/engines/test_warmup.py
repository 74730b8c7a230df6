"""Warmup (#15) on the real tritonserver: a FRESH ``modelfleet serve --stack dev`` answers the README's client
burst (100 requests of 4 x 64 features to fraud-scorer from 8 threads, through the generated client) with no
request rejected by the compiled queue timeout.

Before warmup (measured on this machine, a fresh server per run): 8, 4, 0 and 6 of 100 rejected in the first
burst, none in the next ones: the first requests paid for lazy initialisation. With ``model_warmup`` the
server reports ready only once each model has run its warmup requests (strict readiness), and the first
burst is answered in full. Three fresh servers whose warm bursts show the machine quiet enough to judge (``conclusive``),
three bursts each; the first burst of each is the cold one.
"""

from __future__ import annotations

import re
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from tests.engines.conftest import engine_import, load_module, make_artifact_root, require_tritonserver

require_tritonserver()
np = engine_import("triton", "numpy")
httpclient = engine_import("triton", "tritonclient.http")

from tritonclient.utils import InferenceServerException  # noqa: E402

from modelfleet.render.client import render_client  # noqa: E402
from tests.engines.test_serve_cli import READY_LINE, serving  # noqa: E402

pytestmark = pytest.mark.engine

MODEL = "fraud-scorer"
CONCLUSIVE_RUNS = 3
MAX_SERVERS = 8  # fresh servers tried for three conclusive runs (about 10 s each)


def readme_burst(client_module, url: str, seed: int) -> int:
    """The README's example, as written there: one client per thread, 100 batches of 4; the rejections."""
    local = threading.local()

    def score(features):
        if not hasattr(local, "client"):
            local.client = httpclient.InferenceServerClient(url)
        request = client_module.FraudScorer.request(features, caller="warmup-test")
        try:
            result = local.client.infer(request.model_name, request.inputs, outputs=request.outputs,
                                        **request.options)
        except InferenceServerException as error:
            assert "timeout" in str(error).lower(), error  # a rejection; anything else is a failure
            return None
        return client_module.FraudScorer.decode(result).fraud_probability

    rng = np.random.default_rng(seed)
    batches = [rng.random((4, 64), dtype=np.float32) for _ in range(100)]
    with ThreadPoolExecutor(8) as pool:
        scores = list(pool.map(score, batches))
    return sum(s is None for s in scores)


def test_a_fresh_server_answers_the_readme_burst_without_rejections(project, dev_plan, tmp_path: Path) -> None:
    # the one client of every stack (README: `modelfleet client`), used against the dev stack's server
    (tmp_path / "fleet_client.py").write_text(render_client([project.plan(s) for s in ("dev", "prod", "staging")]))
    client_module = load_module(tmp_path / "fleet_client.py", "fleet_client_warmup")
    root = make_artifact_root(tmp_path / "s3", (MODEL,), preprocessor=False)
    runs: list[list[int]] = []
    while len(conclusive(runs)) < CONCLUSIVE_RUNS and len(runs) < MAX_SERVERS:
        workdir = tmp_path / f"work-{len(runs)}"
        workdir.mkdir()
        with serving(root, workdir, [dev_plan.model(MODEL).server]) as (_, output):
            url = re.search(r"http://(127\.0\.0\.1:\d+)", output.until(READY_LINE, 180)).group(1)
            runs.append([readme_burst(client_module, url, seed=3 * len(runs) + i) for i in range(3)])
    assert len(conclusive(runs)) == CONCLUSIVE_RUNS, f"the machine is too busy to measure warmup: {runs}"
    assert [bursts[0] for bursts in conclusive(runs)] == [0] * CONCLUSIVE_RUNS, runs
    print(f"bursts per fresh server (rejections of 100): {runs}")


def conclusive(runs: list[list[int]]) -> list[list[int]]:
    """Fresh servers whose warm bursts had no rejection. The first burst is the cold one; a warm one with
    rejections means this machine was too busy for the 11 ms queue timeout (other work on its 2 cores: seen
    2 to 16 of 100 on a warm server), and that server's cold burst says nothing about warmup."""
    return [bursts for bursts in runs if not any(bursts[1:])]


def test_the_compiled_configs_warm_up_every_power_of_two_batch(dev_plan) -> None:
    from modelfleet.render.triton import model_config

    config = model_config(dev_plan.model(MODEL))
    assert config.max_batch_size == 128
    assert [(w.batch_size, w.count) for w in config.model_warmup] == [(2**i, 2) for i in range(8)]
    assert dict(config.model_warmup[0].inputs)["features"].zero_data
