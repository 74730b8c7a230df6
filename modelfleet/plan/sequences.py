"""Stateful models (``stateful:``) on Triton's sequence batcher: slots, instances, idle release.

The sequence batcher routes every request of a sequence (one CORRID) to the same slot and tells the model
where a sequence starts, ends and which batch rows are live (the START, END, READY and CORRID control
inputs). A sequence with no request for ``idle_timeout_ms`` is released: its slot is freed and its next
request must carry START again (proven on the real server, tests/engines/test_triton_features.py).

    direct   one slot per batch row of each instance: slots = max(max_batch_size, 1) x instances, so the
             compiler raises the instance count until the slots hold ``max_sequences`` (a sequence beyond
             them waits, unanswered, for a slot to be released)
    oldest   ``max_candidate_sequences`` = ``max_sequences``; each batch takes the next step of the oldest
             waiting sequences, on any instance

The sequence batcher has no queue policy (no timeout, no REJECT: model_config.proto's ModelSequenceBatching
has none), so the p99 is met by sizing instead: the slots hold every live sequence, and the batching
window plus two executions fit in the p99 (the same derivation as a dynamic-batched model, without the
timeout that enforces it there).
"""

from __future__ import annotations

import math

from ..spec.models import ClassicModelSpec
from .types import Decision, SequencePlan

MAX_INSTANCES = 16  # ClassicOverridesSpec.instance_count's bound: more slots need more GPUs, not instances


def sequence_instances(model: ClassicModelSpec, batch: int) -> int:
    """Instances a model runs: its override, raised (direct strategy) until the slots hold max_sequences."""
    count = model.overrides.instance_count or 1
    if model.stateful is None or model.stateful.strategy != "direct":
        return count
    return max(count, min(MAX_INSTANCES, math.ceil(model.stateful.max_sequences / max(batch, 1))))


def sequence_plan(model: ClassicModelSpec, batch: int, instances: int, window_us: int) -> SequencePlan | None:
    stateful = model.stateful
    if stateful is None:
        return None
    slots = max(batch, 1) * instances if stateful.strategy == "direct" else stateful.max_sequences
    return SequencePlan(strategy=stateful.strategy, idle_timeout_us=stateful.idle_timeout_ms * 1000,
                        max_sequences=stateful.max_sequences, slots=slots, max_queue_delay_us=window_us)


def sequence_decision(model: ClassicModelSpec, plan: SequencePlan, batch: int, compute_ms: float) -> Decision:
    if plan.strategy == "direct":
        how = (f"{plan.slots} slots = batch {max(batch, 1)} x {plan.slots // max(batch, 1)} instance(s), for "
               f"{plan.max_sequences} live sequences" + ("" if plan.slots >= plan.max_sequences else
                                                          f" (capped at {MAX_INSTANCES} instances: the rest wait)"))
    else:
        how = f"the {plan.max_sequences} oldest waiting sequences are batched together, on any instance"
    worst = plan.max_queue_delay_us / 1000 + 2 * compute_ms
    return Decision(choice=f"sequence batcher ({plan.strategy}), idle release after {plan.idle_timeout_us} us",
                    reason=f"{how}; no queue timeout exists for sequences, so the p99 {model.sla.p99_latency_ms:g} ms "
                           f"holds by sizing: window {plan.max_queue_delay_us / 1000:g} ms + two executions of "
                           f"{compute_ms:g} ms = {worst:g} ms")
