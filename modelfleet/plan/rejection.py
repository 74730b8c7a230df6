"""Why a layout or an instance type was not chosen, and how close it came (for errors that name the
constraint that actually binds, and the candidates nearest to fitting)."""

from __future__ import annotations

from dataclasses import dataclass

# How far a layout got before it was rejected, in the order the checks run (TTFT: one prompt alone is too slow;
# TPOT: one stream alone is).
LAYOUT, PRECISION, MEMORY, CONTEXT, TTFT, TPOT = range(6)


@dataclass(frozen=True)
class Rejection:
    option: str
    reason: str
    stage: int = LAYOUT
    figure: float = 0.0  # MEMORY: usable GiB; CONTEXT: KV tokens; TTFT, TPOT: estimated ms (how close it came)


def closeness(rejection: Rejection) -> tuple[int, float]:
    """Orders rejections by how close they came: the furthest stage, then the best figure in it."""
    return rejection.stage, -rejection.figure if rejection.stage in (TTFT, TPOT) else rejection.figure
