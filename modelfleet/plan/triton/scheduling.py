"""How Triton schedules one classic model beyond batching and the queue timeout: priority levels, the
sequence batcher (stateful), decoupled responses (streaming) and the preferred batch size. Each choice is
a field of TritonModelPlan and a Decision with its reason; the modules named below derive them."""

from __future__ import annotations

from typing import Any

from ...errors import Issue
from ...spec.models import ClassicModelSpec
from .priorities import default_level, level_issues, priority_decision, priority_levels
from .sequences import sequence_decision, sequence_plan
from .policy import ClassicSizing
from ..types import Decision


def preferred_batch_sizes(model: ClassicModelSpec, sizing: ClassicSizing) -> tuple[tuple[int, ...], Decision | None]:
    """The profile's efficient batch as ``preferred_batch_size``, when the compiled batch can reach it.

    Why only then: Triton executes a batch of a preferred size as soon as it is formed instead of waiting out
    the window; Triton's docs advise leaving it unset unless a size is measurably better, which is what
    ``profile.efficient_batch_size`` states. Sequence models batch by slots, so it is not set for them."""
    wanted = model.profile.efficient_batch_size
    if wanted is None or model.stateful is not None:
        return (), None
    if wanted > sizing.max_batch_size:
        return (), Decision(choice="no preferred_batch_size",
                            reason=f"the profile's efficient batch {wanted} exceeds max_batch_size "
                                   f"{sizing.max_batch_size} (a full batch of {wanted} would not fit the p99)")
    return (wanted,), Decision(choice=f"preferred_batch_size {wanted}",
                               reason=f"the profile measured batch {wanted} as the efficient one: a batch of that size "
                                      "executes as soon as it is formed, without waiting out the batching window")


def scheduling(model: ClassicModelSpec, sizing: ClassicSizing, index: int,
               issues: list[Issue]) -> tuple[dict[str, Any], tuple[Decision, ...]]:
    """The TritonModelPlan fields for these options, and the decisions that explain them."""
    decisions: list[Decision] = []
    levels = priority_levels(model, sizing)
    default = default_level(model, levels)
    fields: dict[str, Any] = {"priority_levels": levels, "default_priority_level": default,
                              "decoupled": model.streaming}
    if levels:
        issues.extend(level_issues(model, levels, sizing, index))
        fields["queue_timeout_us"] = levels[0].queue_timeout_us  # the tightest: what the autoscaler guards
        decisions.append(priority_decision(model, levels, default))
    sequence = sequence_plan(model, sizing.max_batch_size, sizing.instance_count, sizing.max_queue_delay_us)
    if sequence is not None:
        fields["sequence"] = sequence
        decisions.append(sequence_decision(model, sequence, sizing.max_batch_size, sizing.compute_ms))
    if model.streaming:
        decisions.append(Decision(choice="decoupled (streaming)", reason=(
            "the model sends its responses as they are ready (model_transaction_policy.decoupled); the p99 and the "
            "queue timeout count to the first response (the profile's compute_ms is a full batch's time to it), "
            "behind a batch in progress for its whole streams (rps_per_instance counts whole streams); no response "
            "cache (Triton caches only one-response models); clients stream over gRPC")))
    preferred, why = preferred_batch_sizes(model, sizing)
    fields["preferred_batch_sizes"] = preferred
    if why is not None:
        decisions.append(why)
    return fields, tuple(decisions)
