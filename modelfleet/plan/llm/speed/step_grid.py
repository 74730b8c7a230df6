"""A step-time function made cheap for the simulator: evaluated on a grid, memoised, and interpolated.

A simulation asks for tens of thousands of step times, each of a different mix (prompt tokens and their
context, decoding sequences and theirs). The performance model costs tens of microseconds per call; here
each axis is cut at every integer up to 16 and then at 8 points per doubling (9% apart) for token counts, 2
for contexts (attention time is linear in them), a step's time is
the multilinear interpolation between the grid's corners, and every corner is computed once. The axes are
(prompt tokens, context before them, decoding sequences, their mean context), so every corner is a step that
can happen (a prompt's context is never shorter than its tokens). Step times are smooth and nearly linear
between such close points (attention is linear in context), so the interpolation error is well under 1%;
functions linear in each axis (the theory tests' step times) are reproduced exactly.
"""

from __future__ import annotations

import bisect
from typing import Callable

EXACT_BELOW = 16


def _points(per_doubling: int) -> list[int]:
    return sorted({*range(EXACT_BELOW + 1), *(round(EXACT_BELOW * 2 ** (i / per_doubling))
                                              for i in range(1, per_doubling * 24))})


TOKENS = _points(8)  # token counts: the GEMMs' roofline bends here
CONTEXT = _points(2)  # contexts: attention time is linear in them, so a coarse grid interpolates them exactly


def bracket(x: float, points: list[int] = TOKENS) -> tuple[int, int, float]:
    """(grid point below, grid point above, weight of the one above) for ``x`` >= 0."""
    if x <= EXACT_BELOW and x == int(x):
        return int(x), int(x), 0.0
    i = bisect.bisect_left(points, x)
    hi = points[min(i, len(points) - 1)]
    if hi == x or i == 0:
        return hi, hi, 0.0
    lo = points[i - 1]
    return lo, hi, (x - lo) / (hi - lo)


class GridStepTime:
    """``step(prefill_tokens, prefill_context, decodes, decode_context) -> ms`` on the grid (module docstring).
    Share one instance between simulations of the same layout: its memo carries over."""

    def __init__(self, step: Callable[[int, int, int, int], float]) -> None:
        self.step = step
        self.memo: dict[tuple[int, int, int, int], float] = {}

    def exact(self, p: int, prior: int, d: int, dc: int) -> float:
        key = (p, prior, d, dc)
        value = self.memo.get(key)
        if value is None:
            value = self.memo[key] = float(self.step(p, p + prior, d, dc))
        return value

    def __call__(self, prefill_tokens: int, prefill_context: float, decodes: int, decode_context: float) -> float:
        if not prefill_tokens:  # decode-only steps, most of a simulation's: two axes
            d0, d1, wd = bracket(decodes)
            c0, c1, wc = bracket(decode_context, CONTEXT)
            exact = self.exact
            low = exact(0, 0, d0, c0) + wc * (exact(0, 0, d0, c1) - exact(0, 0, d0, c0)) if wc else exact(0, 0, d0, c0)
            if not wd:
                return low
            high = exact(0, 0, d1, c0) + wc * (exact(0, 0, d1, c1) - exact(0, 0, d1, c0)) if wc else exact(0, 0, d1, c0)
            return low + wd * (high - low)
        axes = (bracket(prefill_tokens), bracket(max(0.0, prefill_context - prefill_tokens), CONTEXT) if prefill_tokens
                else (0, 0, 0.0), bracket(decodes), bracket(decode_context, CONTEXT) if decodes else (0, 0, 0.0))
        total = 0.0
        for corner, weight in _corners(axes):
            total += weight * self.exact(*corner)
        return total


def _corners(axes: tuple[tuple[int, int, float], ...]) -> list[tuple[tuple[int, ...], float]]:
    out: list[tuple[tuple[int, ...], float]] = [((), 1.0)]
    for lo, hi, w in axes:
        if w == 0.0:
            out = [(c + (lo,), weight) for c, weight in out]
        else:
            out = [(c + (point,), weight * share) for c, weight in out for point, share in ((lo, 1.0 - w), (hi, w))]
    return out
