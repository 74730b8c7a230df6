"""Overload on the REAL tritonserver with the compiled queue policy: stale requests are rejected, counted,
and no answered request waited in the queue past the compiled timeout.

Set-up: the dev stack's image-preprocessor as compiled (queue timeout from the SLA, REJECT, queue bound
65,536: memory protection), served by the synthetic stand-in (the artifact is left out of the artifact
root), which takes at least the plan's time per batch; on this CPU a batch of 8 takes 20-60 ms whatever the
plan says (its 8 x 602 KB of outputs are made and copied twice), so one instance sustains a few hundred
req/s, well under the plan's figure. Load: open loop (one asyncio thread, ``modelfleet.engines.loadgen``)
at 3x the plan's rps_per_instance, capped at 1,000 req/s, every input distinct (no cache hits).

What happens (measured here: about 90% rejected; the longest queue time of an executed request at most
about 10 ms over the timeout): the queue bound is never reached by 1,200 requests; the timeout sheds
the load. Triton drops a request when its scheduler reaches it after more than the compiled timeout, with
503 "Request timeout expired", counted in nv_inference_request_failure{reason="REJECTED"}; the rest are
executed. Server-side queue times come from Triton's own per-request trace.

Stuck requests (tritonserver 2.51's HTTP frontend, not the policy under test): now and then, under overload on
a loaded machine (4 of 42 runs with both cores busy with other work), 2.51 never answers some requests (50 to
87 of 1,200 seen): the core has finished them ("Found 0 model versions that have in-flight inferences" at the
stop), but their HTTP replies are never sent and their connections stay open until the server's exit timeout.
The client gives such a request up after ``STUCK_AFTER_S``; the tests count them (a warning names how many),
bound them (``MAX_STUCK_SHARE``) and check every other request exactly, allowing for what the core did with
a stuck one (executed or rejected, each counted by the metrics but seen by no client).
"""

from __future__ import annotations

import warnings
from collections import Counter

import pytest

from tests.engines.conftest import engine_import, require_tritonserver  # noqa: E402

require_tritonserver()
engine_import("triton", "aiohttp")

from modelfleet.engines.loadgen import NO_ANSWER as STUCK  # noqa: E402
from modelfleet.engines.loadgen import OK, QUEUE_FULL, TIMEOUT, infer_body, open_loop  # noqa: E402
from modelfleet.engines.probes import metric_value, scrape_metrics  # noqa: E402
from modelfleet.engines.trace import read_trace, trace_args  # noqa: E402
from tests.engines.conftest import served  # noqa: E402

pytestmark = pytest.mark.engine

MODEL = "image-preprocessor"
OVERLOAD = 3.0  # x the plan's rps_per_instance for one instance...
MAX_RATE_RPS = 1000.0  # ...up to what one asyncio client sends here without falling far behind
REQUESTS = 1200  # about 1.2 s of sending
# Hand-off from the batcher to the python stub, beyond waiting for the execution in progress (see below).
HANDOFF_MARGIN_US = 5_000
STUCK_AFTER_S = 20.0  # every answer comes within a second here; a request unanswered this long never will be
MAX_STUCK_SHARE = 0.15  # of the requests; more than the worst seen (87 of 1,200) is a new problem


@pytest.fixture(scope="module")
def overloaded(dev_plan, tmp_path_factory: pytest.TempPathFactory):
    """Serve the preprocessor's compiled server (stand-in), overload it once; stop it; return what was seen:
    (client samples, metrics before, metrics after, Triton's per-request trace)."""
    tmp = tmp_path_factory.mktemp("overload")
    (tmp / "artifacts").mkdir()
    model = dev_plan.model(MODEL)
    bodies = [infer_body(model, index) for index in range(REQUESTS)]
    trace = tmp / "trace.json"
    # Each request's trace is written as soon as Triton releases it, so the trace does not depend on the stop.
    with served(dev_plan, tmp / "artifacts", tmp / "work", (model.server,), tuple(trace_args(trace, flush_every=1)),
                only=(MODEL,)) as (server, local):
        assert [(m.name, m.source) for m in local.models] == [(MODEL, "synthetic")]
        before = scrape_metrics(server.metrics_url)
        samples = open_loop(server.http_url, MODEL, bodies, min(OVERLOAD * model.rps_per_instance, MAX_RATE_RPS),
                            timeout_s=STUCK_AFTER_S)
        after = scrape_metrics(server.metrics_url)
    stuck = sum(sample.outcome == STUCK for sample in samples)
    if stuck:
        warnings.warn(f"tritonserver 2.51 never answered {stuck} of {REQUESTS} requests (see the module docstring)")
    assert stuck <= MAX_STUCK_SHARE * REQUESTS, f"{stuck} of {REQUESTS} requests unanswered; {server.death_report()}"
    traced = [r for r in read_trace(trace) if r.model == MODEL]
    # Every answered request is traced; a server that died mid-load says how.
    assert len(traced) >= REQUESTS - stuck, f"{len(traced)} of {REQUESTS} requests traced; {server.death_report()}"
    return samples, before, after, traced


def delta(before, after, name: str, **labels: str) -> float:
    return metric_value(after, name, **labels) - metric_value(before, name, **labels)


def test_overload_sheds_load_by_the_queue_timeout_not_the_queue_bound(overloaded, dev_plan) -> None:
    samples, _, _, _ = overloaded
    kinds = Counter(sample.outcome for sample in samples)
    assert set(kinds) <= {OK, TIMEOUT, QUEUE_FULL, STUCK}, kinds
    assert dev_plan.model(MODEL).max_queue_size >= REQUESTS  # so a full queue is impossible here
    assert kinds[QUEUE_FULL] == 0, kinds
    assert kinds[TIMEOUT] >= REQUESTS // 2, kinds  # one instance sustains under a third of the load
    assert kinds[OK] >= 50, kinds


def test_timeout_rejections_are_counted_as_rejected_failures(overloaded) -> None:
    """nv_inference_request_failure{reason="REJECTED"} counts exactly the timed-out requests (and a stuck
    request as what the core did with it: rejected or executed)."""
    samples, before, after, _ = overloaded
    kinds = Counter(sample.outcome for sample in samples)
    rejected = delta(before, after, "nv_inference_request_failure", model=MODEL, reason="REJECTED")
    succeeded = delta(before, after, "nv_inference_request_success", model=MODEL)
    assert kinds[TIMEOUT] <= rejected <= kinds[TIMEOUT] + kinds[STUCK], (rejected, kinds)
    assert kinds[OK] <= succeeded <= kinds[OK] + kinds[STUCK], (succeeded, kinds)
    assert rejected + succeeded <= kinds[TIMEOUT] + kinds[OK] + kinds[STUCK], (rejected, succeeded, kinds)


def test_every_rejected_request_had_waited_the_compiled_timeout(overloaded, dev_plan) -> None:
    """Client side: a 503 "Request timeout expired" never comes sooner than the timeout after sending."""
    samples, _, _, _ = overloaded
    timeout_s = dev_plan.model(MODEL).queue_timeout_us / 1e6
    waits = [sample.done_s - sample.sent_s for sample in samples if sample.outcome == TIMEOUT]
    assert waits and min(waits) >= timeout_s, (min(waits), timeout_s)


def test_no_executed_request_waited_in_the_queue_past_the_compiled_timeout(overloaded, dev_plan) -> None:
    """Server side, per request (Triton's trace). Triton checks the timeout while it forms a batch; the formed
    batch is then handed to the instance and may wait for the execution in progress. So the bound on the
    queue time (trace: QUEUE_START to COMPUTE_START) of an executed request is the timeout plus one batch
    execution (the longest seen), plus a hand-off margin; most executed requests stay within the timeout."""
    samples, _, _, traced = overloaded
    timeout_us = dev_plan.model(MODEL).queue_timeout_us
    executed = [r for r in traced if r.queue_us is not None]
    kinds = Counter(sample.outcome for sample in samples)
    assert kinds[OK] <= len(executed) <= kinds[OK] + kinds[STUCK]  # distinct inputs: no cache hits
    longest_execution_us = max(r.compute_us for r in executed)
    waits = sorted(r.queue_us for r in executed)
    assert waits[-1] <= timeout_us + longest_execution_us + HANDOFF_MARGIN_US, (waits[-1], timeout_us)
    assert waits[len(waits) // 2] <= timeout_us
