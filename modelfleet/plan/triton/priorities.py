"""Priority classes of one model (``sla.priorities``) as Triton priority levels, each with its own queue policy.

Triton's dynamic batcher keeps one queue per level and forms every batch from the highest level that has
requests (level 1 first). The classes are ranked by their p99, tightest first (spec/triton_options.py). Each level gets the queue policy the model's queue derivation gives at that
level's p99 (triton_policy's module docstring):

    queue_timeout_us(level) = p99(level) - 2 x compute        REJECT once it has waited that long
                              (a streaming model: compute + its first responses, triton_policy)
    max_queue_size(level)   = its share of the 256 MiB memory bound, at least what the instances drain
                              within its timeout, at most 65,536

So under overload the highest class is served first and held to its own p99 by its own timeout, while a
lower class waits behind it and is shed: rejected after its (longer) timeout, or at its bound. The model's
``queue_timeout_us`` in the plan is the highest level's (the tightest), which the autoscaler's target is
derived from. A request that names no class gets ``default_priority`` (default: the lowest class).
"""

from __future__ import annotations

import math

from ...errors import Issue
from ...spec.models import ClassicModelSpec
from ...spec.triton_options import ranked
from .policy import MAX_QUEUE_SIZE, QUEUE_MEMORY_BUDGET_BYTES, ClassicSizing, request_bytes
from ..types import Decision, PriorityLevelPlan


def priority_levels(model: ClassicModelSpec, sizing: ClassicSizing) -> tuple[PriorityLevelPlan, ...]:
    """The levels, highest first; empty without ``sla.priorities``."""
    levels = []
    compute_us = int(sizing.compute_ms * 1000) + int(sizing.own_ms * 1000)  # the batch in progress and its own
    drain_rps = sizing.rps_per_instance * sizing.instance_count
    by_memory = QUEUE_MEMORY_BUDGET_BYTES // request_bytes(model)
    for rank, (name, spec, p99) in enumerate(ranked(model.sla.priorities or {}, model.sla.p99_latency_ms), start=1):
        timeout = (int(p99 * 1000) - compute_us) // 100 * 100
        if p99 == model.sla.p99_latency_ms and model.overrides.queue_timeout_us is not None:
            timeout = model.overrides.queue_timeout_us  # the override speaks for the model's own p99
        drainable = max(sizing.max_batch_size, 1, math.ceil(drain_rps * max(timeout, 0) / 1e6))
        size = model.overrides.max_queue_size or min(MAX_QUEUE_SIZE, max(drainable, int(by_memory * spec.share)))
        levels.append(PriorityLevelPlan(name=name, level=rank, share=spec.share, p99_latency_ms=p99,
                                        queue_timeout_us=timeout, max_queue_size=size))
    return tuple(levels)


def default_level(model: ClassicModelSpec, levels: tuple[PriorityLevelPlan, ...]) -> int:
    if not levels:
        return 0
    wanted = model.sla.default_priority
    return next((lv.level for lv in levels if lv.name == wanted), levels[-1].level)


def level_issues(model: ClassicModelSpec, levels: tuple[PriorityLevelPlan, ...], sizing: ClassicSizing,
                 index: int) -> list[Issue]:
    """A level whose p99 leaves no time to queue (or no more than the batching window) cannot be served."""
    issues = []
    for level in levels:
        if level.queue_timeout_us > sizing.max_queue_delay_us:
            continue
        issues.append(Issue("", 0, 0, f"models[{index}].sla.priorities.{level.name}.p99_latency_ms",
                            f"{model.name}: class {level.name}'s p99 {level.p99_latency_ms:g} ms leaves a queue timeout "
                            f"of {level.queue_timeout_us} us, not more than the {sizing.max_queue_delay_us} us batching "
                            f"window, after two executions of {sizing.compute_ms:g} ms",
                            f"raise it above {math.ceil(sizing.compute_ms + sizing.own_ms + 1)} ms"))
    return issues


def priority_decision(model: ClassicModelSpec, levels: tuple[PriorityLevelPlan, ...], default: int) -> Decision:
    parts = "; ".join(f"{lv.level} {lv.name} ({lv.share:.0%} of the load): p99 {lv.p99_latency_ms:g} ms -> queue "
                      f"timeout {lv.queue_timeout_us / 1000:g} ms, queue <= {lv.max_queue_size}" for lv in levels)
    name = next(lv.name for lv in levels if lv.level == default)
    return Decision(choice=f"{len(levels)} priority levels, default {default} ({name})",
                    reason=f"each batch is formed from the highest level with requests waiting, so under overload "
                           f"the lower classes wait and are shed first while each class keeps its own timeout: {parts}; "
                           f"a request naming no class is {name}")
