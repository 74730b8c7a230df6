"""Triton's rate limiter on a GPU shared by several models: one batch at a time, and when the compiler sets it.

Without it, Triton runs each packed model's batch as soon as the batch is formed, so the models' batches run
on the GPU at once and each takes longer than its measured ``compute_ms`` by an amount no figure in the plan
knows (it depends on how their kernels overlap). With the rate limiter, every instance on the server needs
the GPU's one ``gpu`` resource to execute (``rate_limiter { resources [{name: "gpu", count: 1}] }``, one copy
per device: ``--rate-limit-resource=gpu:1``), so batches run one at a time, each at its measured time, and
when several models have a batch ready the one with the tighter p99 is picked more often (``priority``: 1 for
the tightest; Triton gives an instance of priority 2 half the chances of one of priority 1).

What it costs, measured on the real tritonserver 2.51 (tests/engines/test_rate_limiter.py): a batch formed
while a neighbour's batch holds the GPU waits for it *outside* its queue timeout (a request with a 300 ms
timeout was answered after 1.3 s behind a neighbour's 1 s batch, not rejected). So a model's worst answered
request becomes its queue timeout, one batch of each neighbour and its own batch, and the compiler re-derives
the timeouts to keep it within the p99:

    queue_timeout_us(m) = p99(m) - compute(m) - sum of compute(n) over the server's other models n

(the batch in progress is the longest of them, already in the sum; the priority weighting can let each
neighbour go once before it, hence the sum). The compiler sets the rate limiter on a shared GPU server when
that leaves every member more than its batching window to queue in, and nothing it cannot re-derive:

* a stateful model (the sequence batcher has no queue timeout), a streaming one (a batch holds the GPU for
  its whole streams) or one with priority classes (their levels' timeouts and the limiter's weights would
  order the same requests twice) keeps its server unlimited, and so does an ``overrides.queue_timeout_us``;
* otherwise a member whose p99 leaves no time to queue behind its neighbours' batches keeps it unlimited.

The flag ``--rate-limit=execution_count`` is required: without it the server ignores every model's
``rate_limiter`` (measured: the same configs ran their batches side by side). A server left unlimited says
why in ``plan``; the fix for a tight model beside long batches is its own ``pool``.
"""

from __future__ import annotations

from ..types import Decision, TritonModelPlan

RESOURCE = "gpu"  # one copy per GPU: the server's batches run one at a time
SERVER_FLAGS = ("--rate-limit=execution_count", f"--rate-limit-resource={RESOURCE}:1")


def _unlimited(models: list[TritonModelPlan]) -> str | None:
    """Why the server cannot be rate-limited (None: it can, if every member keeps time to queue)."""
    for m in models:
        if m.sequence is not None:
            return f"{m.name} is stateful (the sequence batcher has no queue timeout to re-derive)"
        if m.decoupled:
            return f"{m.name} streams (a batch holds the GPU until its streams end)"
        if m.priority_levels:
            return f"{m.name} has priority classes (their levels already order its requests)"
    return None


def _timeouts(models: list[TritonModelPlan], overrides: set[str]) -> dict[str, int] | str:
    """Each member's re-derived queue timeout, or why one cannot queue behind its neighbours."""
    total = sum(m.compute_ms for m in models)
    out = {}
    for m in models:
        if m.name in overrides:
            return f"{m.name}'s queue timeout is an override"
        timeout = int((m.p99_latency_ms - total) * 1000) // 100 * 100  # its own batch and each neighbour's
        if timeout <= m.max_queue_delay_us:
            others = total - m.compute_ms
            return (f"{m.name}'s p99 {m.p99_latency_ms:g} ms leaves no time to queue after its own batch "
                    f"{m.compute_ms:g} ms and one batch of each neighbour ({others:g} ms)")
        out[m.name] = timeout
    return out


def rate_limit(models: list[TritonModelPlan], overrides: set[str]) -> tuple[list[TritonModelPlan], Decision | None]:
    """The members of one GPU server, rate-limited where the module docstring says, and why (None: one model
    on its GPU, nothing to contend with). ``overrides``: the models whose queue timeout models.yaml sets."""
    if len(models) < 2:
        return models, None
    why = _unlimited(models)
    timeouts = _timeouts(models, overrides) if why is None else why
    if isinstance(timeouts, str):
        return models, Decision(choice="no rate limiter", reason=f"its models run their batches side by side on "
                                f"the GPU, each timeout assuming its batch at its measured time: {timeouts}; a "
                                "model with a tight p99 beside long batches is better in a pool of its own")
    ranks = {m.name: rank for rank, m in enumerate(sorted(models, key=lambda m: (m.p99_latency_ms, m.name)), 1)}
    limited = [_limited(m, timeouts[m.name], ranks[m.name], models) for m in models]
    order = ", ".join(f"{m.name} {ranks[m.name]}" for m in sorted(models, key=lambda m: ranks[m.name]))
    return limited, Decision(choice="rate limiter: one batch at a time on the GPU", reason=(
        f"every instance needs the GPU's one '{RESOURCE}' resource (--rate-limit=execution_count "
        f"--rate-limit-resource={RESOURCE}:1), so each batch runs at its measured time; priority by p99 ({order}); "
        "each model's queue timeout leaves room for one batch of each neighbour, which a formed batch waits for "
        "outside its timeout"))


def _limited(model: TritonModelPlan, timeout_us: int, priority: int, models: list[TritonModelPlan]) -> TritonModelPlan:
    others = sum(m.compute_ms for m in models if m.name != model.name)
    window = min(model.max_queue_delay_us, timeout_us // 2 // 100 * 100)
    decision = Decision(choice=f"rate limiter priority {priority}, queue timeout {timeout_us} us",
                        reason=f"p99 {model.p99_latency_ms:g} ms = queue timeout {timeout_us / 1000:g} ms + one batch "
                               f"of each neighbour on its GPU ({others:g} ms, waited for outside the timeout) + its own "
                               f"batch {model.compute_ms:g} ms")
    kept = tuple(d for d in model.decisions if not d.choice.startswith("timeout "))  # the unlimited derivation
    return model.model_copy(update={"queue_timeout_us": timeout_us, "max_queue_delay_us": window,
                                    "rate_limiter_priority": priority, "decisions": (decision, *kept)})
