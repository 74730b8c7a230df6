"""A layout's step time as the scheduler simulation calls it, once per engine step: compiled with the simulation
(setup.py), so that the call, most of a simulation's time in Python, stays in C.

``StepTimer`` is ``performance.step_ms``'s sum with a measured profile's correction (peak.step_time_for
builds it): the dense work of ``m`` tokens and the LM head over the sampled tokens, memoised by count
(computed by the performance model's own functions on a miss), plus each layer kind's attention, a roofline
for the prompt tokens and one for the decoding sequences at the step's contexts. Every operation is the
performance model's, in its order, so the figures are the same to the bit (tests/plan/test_performance.py
holds the two equal; tests/plan/test_native_simulator.py holds the compiled build equal to Python).
"""

from __future__ import annotations

from typing import Callable


class Roof:
    """performance.Roofline.time_us at one GPU's peaks: the two bounds blended (p-norm), plus a floor."""

    def __init__(self, *, compute_efficiency: float, memory_efficiency: float, floor_us: float, sharpness: float,
                 tflops: float, gbs: float) -> None:
        self.compute_efficiency, self.memory_efficiency = compute_efficiency, memory_efficiency
        self.floor_us, self.sharpness, self.tflops, self.gbs = floor_us, sharpness, tflops, gbs

    def time_us(self, flops: float, nbytes: float) -> float:
        compute = flops / (self.tflops * 1e6 * self.compute_efficiency)
        memory = nbytes / (self.gbs * 1e3 * self.memory_efficiency)
        p = self.sharpness
        return (compute**p + memory**p) ** (1.0 / p) + self.floor_us


class Kind:
    """One layer kind's attention (performance._Attention) and how many layers have it."""

    def __init__(self, *, count: float, pair_flops: float, prompt_bytes: float, cached_flops: float,
                 cached_bytes: float, window: float) -> None:
        self.count, self.pair_flops, self.prompt_bytes = count, pair_flops, prompt_bytes
        self.cached_flops, self.cached_bytes, self.window = cached_flops, cached_bytes, window


class StepTimer:
    """``(prompt tokens, their context, decoding sequences, their mean context) -> ms`` (module docstring).
    ``dense(m)`` and ``head(logits)`` are microseconds; ``dispatch`` the per-prompt CPU cost (ms), ``prefill``
    and ``tpot`` the measured profile's corrections of a step with and without a prompt."""

    def __init__(self, *, dense: Callable[[int], float], head: Callable[[int], float], kinds: list[Kind],
                 context: Roof, decode: Roof, dispatch: float, prefill: float, tpot: float) -> None:
        self.dense, self.head, self.kinds = dense, head, kinds
        self.context, self.decode = context, decode
        self.dispatch, self.prefill, self.tpot = dispatch, prefill, tpot
        self.dense_us: dict[int, float] = {}
        self.head_us: dict[int, float] = {}

    def __call__(self, prompt_tokens: int, prompt_context: float, decoding: int, decode_context: float) -> float:
        return self.time(prompt_tokens, prompt_context, decoding, decode_context)

    def time(self, prompt_tokens: int, prompt_context: float, decoding: int, decode_context: float) -> float:
        time = self.model_ms(prompt_tokens, prompt_context, decoding, decode_context)
        return (time + self.dispatch) * self.prefill if prompt_tokens else time * self.tpot

    def model_ms(self, prompt_tokens: int, prompt_context: float, decoding: int, decode_context: float) -> float:
        """performance.step_ms's figure (no correction, no dispatch)."""
        m = prompt_tokens + decoding
        if m <= 0:
            return 0.0
        dense = self.dense_us.get(m)
        if dense is None:
            dense = self.dense(m)
            self.dense_us[m] = dense
        logits = decoding + (1 if prompt_tokens else 0)
        head = self.head_us.get(logits)
        if head is None:
            head = self.head(logits)
            self.head_us[logits] = head
        attention = 0.0
        for a in self.kinds:
            time = 0.0
            if prompt_tokens:
                span = prompt_context - prompt_tokens / 2.0  # causal: a query sees half its chunk
                if a.window < span:  # min(span, window), as Python's min picks
                    span = a.window
                time += self.context.time_us(a.pair_flops * prompt_tokens * span, a.prompt_bytes * prompt_tokens)
            if decoding:
                reach = decode_context
                if a.window < reach:
                    reach = a.window
                cached = decoding * reach
                time += self.decode.time_us(cached * a.cached_flops, cached * a.cached_bytes)
            attention += a.count * time
        return (dense + head + attention) / 1000.0
