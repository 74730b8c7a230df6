"""The rate limiter as the compiler sets it, on the REAL tritonserver (plan/triton/rate_limiter.py).

Two models packed on one server (synthetic stand-ins that take the plan's compute time, sleeping, so the
timing does not depend on this shared machine's cores): ``slow-batch`` (2 s a batch) and ``quick-batch``.
Their p99s leave room for one batch of each other, so the compiler rate-limits the server: one batch at a
time, the tighter p99 first, each queue timeout re-derived around the neighbour's batch.

* With the compiled flags, a quick request sent while the slow batch runs waits for it and is answered within
  its p99 (2.5 s), after waiting longer than its 400 ms queue timeout: the wait is outside the timeout, which is
  why the compiler re-derives it (p99 - its own batch - the neighbour's).
* The same configs without ``--rate-limit=execution_count``: the quick batch runs beside the slow one. The
  configs' ``rate_limiter`` alone does nothing: the server flag is needed.
"""

from __future__ import annotations

import threading
import time

import pytest

from tests.engines.conftest import engine_import, require_tritonserver  # noqa: E402

require_tritonserver()
np = engine_import("triton", "numpy")
httpclient = engine_import("triton", "tritonclient.http")

from modelfleet.plan.compiler import compile_fleet  # noqa: E402
from modelfleet.plan.triton.rate_limiter import SERVER_FLAGS  # noqa: E402
from modelfleet.spec.load import parse_fleet_text  # noqa: E402
from tests.engines.conftest import served, served_config  # noqa: E402

pytestmark = pytest.mark.engine

MODEL = """
  - name: {name}
    type: other
    framework: python
    artifact: s3://modelfleet-tests/{name}
    size: {{memory_gib: 0.1}}
    deterministic: false
    handles_cancellation: true
    inputs: [{{name: x, dtype: fp32, dims: [1]}}]
    outputs: [{{name: y, dtype: fp32, dims: [1]}}]
    sla: {{p99_latency_ms: {p99}, peak_rps: 1}}
    profile: {{rps_per_instance: {rps}, compute_ms: {compute}, measured_on: t4}}
    overrides: {{max_batch_size: 1}}
"""
FLEET = "models:" + MODEL.format(name="slow-batch", p99=5000, rps=2, compute=2000) + MODEL.format(
    name="quick-batch", p99=2500, rps=10, compute=100)


@pytest.fixture(scope="module")
def plan(project):
    return compile_fleet(parse_fleet_text(FLEET), project.environment("dev"), project.catalogue())


def request(url: str, name: str, out: dict) -> None:
    client = httpclient.InferenceServerClient(url)
    inputs = [httpclient.InferInput("x", [1, 1], "FP32")]
    inputs[0].set_data_from_numpy(np.zeros((1, 1), np.float32))
    sent = time.monotonic()
    try:
        client.infer(name, inputs)
        out[name] = ("ok", time.monotonic() - sent)
    except Exception as error:  # noqa: BLE001  (the outcome is what the test asserts)
        out[name] = (str(error), time.monotonic() - sent)
    finally:
        client.close()


def slow_then_quick(server) -> dict:
    """The slow model's batch, then (300 ms later, while it runs) a quick request; each outcome and latency."""
    url, out = server.http_url.removeprefix("http://"), {}
    slow = threading.Thread(target=request, args=(url, "slow-batch", out))
    slow.start()
    time.sleep(0.3)
    quick = threading.Thread(target=request, args=(url, "quick-batch", out))
    quick.start()
    slow.join(timeout=30)
    quick.join(timeout=30)
    return out


@pytest.fixture(scope="module")
def runs(plan, tmp_path_factory):
    """(limited, unlimited) outcomes: the compiled server, then the same repository without the flags."""
    (server_plan,) = plan.triton_servers
    assert set(SERVER_FLAGS) <= set(server_plan.args)
    bare = plan.model_copy(update={"triton_servers": (server_plan.model_copy(update={
        "args": tuple(a for a in server_plan.args if a not in SERVER_FLAGS)}),)})
    out = []
    for which, compiled in (("limited", plan), ("unlimited", bare)):
        tmp = tmp_path_factory.mktemp(which)
        with served(compiled, tmp / "artifacts", tmp / "work") as (server, local):
            assert {m.source for m in local.models} == {"synthetic"}
            live = served_config(server, "quick-batch")
            assert [(r.name, r.count) for r in live.instance_group[0].rate_limiter.resources] == [("gpu", 1)]
            out.append(slow_then_quick(server))
    return out


def test_the_compiler_rate_limits_a_server_whose_p99s_leave_room_for_each_others_batches(plan) -> None:
    slow, quick = plan.model("slow-batch"), plan.model("quick-batch")
    assert (quick.rate_limiter_priority, slow.rate_limiter_priority) == (1, 2)  # the tighter p99 first
    # p99 - its own batch - the neighbour's: the wait for the neighbour is outside the queue timeout
    assert quick.queue_timeout_us == int((quick.p99_latency_ms - quick.compute_ms - slow.compute_ms) * 1000) // 100 * 100
    assert slow.queue_timeout_us == int((slow.p99_latency_ms - slow.compute_ms - quick.compute_ms) * 1000) // 100 * 100
    assert plan.triton_servers[0].rate_limiter.choice == "rate limiter: one batch at a time on the GPU"


def test_with_the_flag_a_batch_waits_for_its_neighbours_and_keeps_its_p99(runs, plan) -> None:
    limited, _ = runs
    slow, quick = plan.model("slow-batch"), plan.model("quick-batch")
    assert limited["slow-batch"][0] == "ok" and limited["quick-batch"][0] == "ok", limited
    waited = limited["quick-batch"][1] * 1000
    assert waited >= slow.compute_ms - 300 - 150, waited  # it ran after the slow batch (sent 300 ms into it),
    assert waited > quick.queue_timeout_us / 1000, waited  # waiting longer than its queue timeout (outside it),
    assert waited <= quick.p99_latency_ms, waited  # and within its p99


def test_without_the_flag_the_rate_limiter_config_does_nothing(runs, plan) -> None:
    limited, unlimited = runs
    assert unlimited["quick-batch"][0] == "ok", unlimited
    # side by side: the quick batch does not wait for the slow one
    assert unlimited["quick-batch"][1] < 0.5 * limited["quick-batch"][1], (unlimited, limited)
    assert unlimited["quick-batch"][1] * 1000 < plan.model("slow-batch").compute_ms / 2
