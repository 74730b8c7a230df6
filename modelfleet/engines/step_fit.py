"""A step-time model of one running engine, fitted to figures a benchmark client measures. Pure.

What is measured (``vllm bench serve``, one replica): the TTFT of a lone request of ``L`` prompt tokens,
and the median inter-token latency of ``B`` sequences decoding together. Both are linear in the model's
coefficients:

- a lone TTFT is ``overhead + step(prefill=L)``: one engine step (``L`` within the token budget) plus what
  lies outside the engine (HTTP, tokenising, handing the request to the engine core, streaming the token);
- a median ITL at batch ``B`` is ``step(decodes=B)``: most steps of ``B`` decoding sequences hold no prefill.

``step_ms = base + prefill_token * p + prefill_attention * p * (prefill_context - p / 2) + decode * decodes
+ decode_context * decodes * decode_context``, in the simulator's terms (``StepTime``: ``p`` prompt tokens
whose context ends at ``prefill_context``; ``decodes`` sequences of mean context ``decode_context``): the
prompt's attention grows with the context its tokens see, a decode's with the context it reads. Fitted by weighted least squares of the relative error (a 10% miss on a
5 ms step weighs what it weighs on a 50 ms one), every coefficient non-negative (a step never gets faster
with more work): the exact non-negative solution, by trying every subset of the terms, which is cheap for
six unknowns and needs no dependency.
"""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

TERMS = ("overhead", "base", "prefill_token", "prefill_attention", "decode", "decode_context")


class FitError(ValueError):
    """The measurements cannot pin the model down (too few, or none of a kind)."""


@dataclass(frozen=True, kw_only=True)
class Observation:
    """One measured figure: ``first_token`` (a lone request's TTFT, ``prefill_tokens`` = its prompt) or
    ``decode_step`` (median ITL of ``decodes`` sequences, each reading ``context_per_decode`` tokens)."""

    kind: Literal["first_token", "decode_step"]
    ms: float
    prefill_tokens: int = 0
    decodes: int = 0
    context_per_decode: int = 0


def _row(obs: Observation) -> tuple[float, ...]:
    """The observation's value of each term (its design row)."""
    if obs.kind == "first_token":
        p = float(obs.prefill_tokens)
        return (1.0, 1.0, p, p * p / 2.0, 0.0, 0.0)
    b = float(obs.decodes)
    return (0.0, 1.0, 0.0, 0.0, b, b * obs.context_per_decode)


@dataclass(frozen=True, kw_only=True)
class StepFit:
    """Fitted coefficients (ms, ms per token...), callable as the simulator's step time."""

    overhead_ms: float
    base_ms: float
    prefill_token_ms: float
    prefill_attention_ms: float
    decode_ms: float
    decode_context_ms: float
    points: tuple[tuple[Observation, float], ...]  # each observation and what the fit says of it

    def __call__(self, prefill_tokens: int, prefill_context: int, decodes: int, decode_context: int) -> float:
        """One engine step in ms (the overhead outside the engine is not a step's: add it to a TTFT)."""
        attention = prefill_tokens * (prefill_context - prefill_tokens / 2.0)
        return (self.base_ms + self.prefill_token_ms * prefill_tokens + self.prefill_attention_ms * attention
                + self.decode_ms * decodes + self.decode_context_ms * decodes * decode_context)

    def errors(self) -> list[float]:
        """Relative error of the fit on each observation: fitted / measured - 1."""
        return [fitted / obs.ms - 1.0 for obs, fitted in self.points]

    def median_abs_error(self) -> float:
        return statistics.median(abs(e) for e in self.errors())

    def max_abs_error(self) -> float:
        return max(abs(e) for e in self.errors())


def fit_step_time(observations: Sequence[Observation]) -> StepFit:
    """The non-negative least-squares step model (relative error) of ``observations``."""
    kinds = {o.kind for o in observations}
    if kinds != {"first_token", "decode_step"} or len(observations) < len(TERMS):
        raise FitError(f"{len(observations)} observations of {sorted(kinds)}: need both first_token and "
                       f"decode_step, at least {len(TERMS)} in all")
    if any(o.ms <= 0 for o in observations):
        raise FitError("every measured time must be positive")
    rows = [[x / o.ms for x in _row(o)] for o in observations]  # weighted: relative error
    best: tuple[float, list[float]] | None = None
    for size in range(1, len(TERMS) + 1):
        for subset in itertools.combinations(range(len(TERMS)), size):
            solved = _least_squares([[r[i] for i in subset] for r in rows], [1.0] * len(rows))
            if solved is None or min(solved) < 0:
                continue
            coefficients = [0.0] * len(TERMS)
            for i, value in zip(subset, solved):
                coefficients[i] = value
            sse = sum((sum(c * x for c, x in zip(coefficients, r)) - 1.0) ** 2 for r in rows)
            if best is None or sse < best[0] - 1e-15:
                best = (sse, coefficients)
    if best is None:
        raise FitError("no non-negative fit")
    c = best[1]
    points = tuple((o, sum(ci * x for ci, x in zip(c, _row(o)))) for o in observations)
    return StepFit(overhead_ms=c[0], base_ms=c[1], prefill_token_ms=c[2], prefill_attention_ms=c[3],
                   decode_ms=c[4], decode_context_ms=c[5], points=points)


def _least_squares(a: list[list[float]], y: list[float]) -> list[float] | None:
    """argmin |a x - y| by the normal equations of unit-norm columns (Gauss-Jordan, partial pivoting); None
    when the columns are (nearly) dependent."""
    n = len(a[0])
    norms = [sum(r[i] ** 2 for r in a) ** 0.5 for i in range(n)]
    if min(norms) == 0:
        return None
    a = [[x / norms[i] for i, x in enumerate(r)] for r in a]
    m = [[sum(r[i] * r[j] for r in a) for j in range(n)] + [sum(r[i] * v for r, v in zip(a, y))]
         for i in range(n)]
    for col in range(n):
        pivot = max(range(col, n), key=lambda r: abs(m[r][col]))
        if abs(m[pivot][col]) <= 1e-10:
            return None
        m[col], m[pivot] = m[pivot], m[col]
        for r in range(n):
            if r != col:
                f = m[r][col] / m[col][col]
                m[r] = [x - f * p for x, p in zip(m[r], m[col])]
    return [m[i][n] / m[i][i] / norms[i] for i in range(n)]
