"""Whether one layout of an LLM meets its whole SLA at peak load, and with how many replicas.

For a layout (GPU, tp, pp, expert parallelism) the performance model (llm/speed/performance.py) times engine steps; this
module turns steps into the figures an SLA is stated in, for a replica with ``b`` sequences in flight:

- ``tpot(b)``: time per output token in steady state (performance.tpot_ms);
- ``service(b)``: the time a prompt of ``input_tokens`` occupies the engine, chunked into steps of at most
  ``max_num_batched_tokens`` prompt tokens, each beside the other ``b - 1`` sequences' decode tokens;
- ``rate(b)``: requests per second the replica completes (Little's law: ``b`` slots, each held for the
  service time plus ``output_tokens - 1`` decode steps);
- ``ttft_p99(b, rate)``: the prompt's own service plus its p99 wait behind other prompts. vLLM prefills
  waiting prompts one after another, so the engine is a single server for prompts at utilisation
  ``rho = rate x service``; requests arrive at random (Poisson), and Kingman's approximation of the M/G/1
  wait gives its tail: ``P(wait > t) = rho exp(-2 (1 - rho) t / (service (1 + cv2)))``, so
  ``p99 = service (1 + cv2) ln(100 rho) / (2 (1 - rho))``. ``cv2``, the squared coefficient of variation of
  the prompts' service, is that of an exponential distribution (1) as far as the context allows: prompts of
  mean ``I`` within ``[0, M]`` vary at most by ``(M - I) / I``, so prompts that fill the context (the default
  request shape) are all alike (0). With a fixed number of sequences in flight
  (``peak_concurrent_sequences``) a prompt waits behind at most the ``b - 1`` others, which caps the wait.

Choosing: ``max_num_seqs`` is the most sequences a replica runs with TPOT within its p99 (TPOT grows with the
batch), within the KV cache and the stack's cap; the load a replica may carry is the most sequences (or
requests/s) at which the p99 TTFT still holds; replicas are the load over that, at least the availability
floor. Every figure is memoised per batch size: a candidate costs a few dozen engine-step estimates.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

from .performance import GpuPerformance, Layout, LlmShape, Step, prefill_ms, step_ms, tpot_ms

# Prompt tokens one engine step takes (--max-num-batched-tokens) when the model does not say: the prompt's own
# length rounded up to a power of two, within [2,048, 8,192]. At 8,192 a prefill chunk is compute-bound
# already, so longer chunks gain nothing; vLLM's per-GPU activation reserve (sizing.LLM_RUNTIME_OVERHEAD) is
# measured at 8,192; and shorter chunks keep the decode steps that carry them short.
MIN_BATCHED_TOKENS, MAX_BATCHED_TOKENS = 2048, 8192

LoadKind = Literal["sequences", "output_tokens_per_s", "requests_per_s"]


@dataclass(frozen=True)
class SpeedCorrection:
    """Measured / predicted ratios from a measured profile, applied to every prompt (prefill) and decode
    (TPOT) time of the model; ``source`` then replaces the calibration's name in the estimates."""

    prefill: float = 1.0
    tpot: float = 1.0
    source: str = "measured profile"


@dataclass(kw_only=True, frozen=True)
class Demand:
    """What one layout must serve: the request shape, the targets, the load and the replica rules."""

    input_tokens: int
    output_tokens: int
    max_prompt_tokens: int  # the longest prompt the context admits (max_context_tokens - output_tokens)
    ttft_ms: float
    tpot_ms: float | None  # None: no target (max_num_seqs by the KV cache alone)
    load: LoadKind
    amount: float  # sequences, output tokens/s or requests/s at peak
    floor: int  # replicas availability demands
    seqs_cap: int  # the stack's ceiling on --max-num-seqs
    pinned_seqs: int | None = None  # overrides.max_num_seqs
    pinned_replicas: int | None = None  # overrides.replicas, or 1 in a single-replica stack
    batched_tokens: int | None = None  # overrides.max_num_batched_tokens
    pinned_by: str = "overrides.replicas"  # what pinned the replicas: the override, or "single replica"
    traffic: Any = None  # peak.Traffic: how requests arrive and how long they are; None: fixed lengths at the
    # means, Poisson at the rate (or a closed loop of ``amount`` users for a sequences load)
    seed: int = 0  # the simulations' (peak.seed_of the traffic)

    @property
    def prompt_cv2(self) -> float:
        """How much prompts vary (the docstring's cv2): exponential, within what the context admits."""
        return max(0.0, min(1.0, (self.max_prompt_tokens - self.input_tokens) / self.input_tokens))

    @property
    def requests_per_s(self) -> float | None:
        if self.load == "requests_per_s":
            return self.amount
        return self.amount / self.output_tokens if self.load == "output_tokens_per_s" else None


@dataclass(kw_only=True, frozen=True)
class Fit:
    """A layout that serves its demand: the engine settings, the replicas and the figures at peak."""

    max_num_seqs: int
    max_num_batched_tokens: int
    replicas: int
    sequences_per_replica: int
    prefill_ms: float
    ttft_p99_ms: float
    tpot_ms: float
    tpot_at_max_ms: float  # with max_num_seqs sequences: the slowest a stream gets
    output_tokens_per_s_per_replica: float
    binding: str  # memory, ttft, tpot, availability, max_num_seqs cap, overrides...
    limits: dict = field(default_factory=dict, compare=False)  # what bounded each figure, for the explanation
    shortfall: str | None = None  # a pinned replica count that cannot carry the peak, in words
    simulation: Any = None  # simulation.SimulationResult at the chosen replicas: what ttft_p99_ms rests on
    closed_form_ttft_p99_ms: float | None = None  # the closed form's figure, kept for comparison
    simulations: int = 0  # simulations run to choose max_num_seqs and the replicas


@dataclass(frozen=True)
class Miss:
    """A layout no replica count rescues: one prompt or one stream is already too slow."""

    stage: Literal["ttft", "tpot"]
    figure_ms: float
    reason: str


class Speed:
    """One layout's figures at each batch size, memoised (see the module docstring)."""

    def __init__(self, gpu: GpuPerformance, shape: LlmShape, layout: Layout, input_tokens: int,
                 output_tokens: int, correction: SpeedCorrection | None) -> None:
        self.gpu, self.shape, self.layout = gpu, shape, layout
        self.input, self.output = input_tokens, output_tokens
        self.correction = correction or SpeedCorrection()
        self.source = self.correction.source if correction is not None else gpu.source
        self.prefill_ms = prefill_ms(gpu, shape, layout, input_tokens) * self.correction.prefill
        self._tpot: dict[int, float] = {}
        self._service: dict[tuple[int, int], float] = {}

    def tpot(self, batch: int) -> float:
        if batch not in self._tpot:
            self._tpot[batch] = tpot_ms(self.gpu, self.shape, self.layout, batch, self.input,
                                        self.output) * self.correction.tpot
        return self._tpot[batch]

    def service(self, batch: int, chunk: int) -> float:
        """A prompt's time in the engine: its chunks, each a step beside ``batch - 1`` decoding sequences."""
        key = (batch, chunk)
        if key not in self._service:
            dispatch = self.gpu.prefill_dispatch_ms_per_layer * self.shape.layers
            context = self.input + self.output // 2
            total, done = dispatch, 0
            while done < self.input:
                size = min(chunk, self.input - done)
                done += size
                total += step_ms(self.gpu, self.shape, self.layout, Step(size, done, batch - 1, context))
            self._service[key] = total * self.correction.prefill
        return self._service[key]

    def rate(self, batch: int, chunk: int) -> float:
        """Requests per second with ``batch`` sequences in flight (Little's law)."""
        return batch * 1000.0 / (self.service(batch, chunk) + (self.output - 1) * self.tpot(batch))


def p99_wait_ms(service_ms: float, rate: float, cv2: float, cap_ms: float = math.inf) -> float:
    """The p99 wait of a prompt behind others (the module docstring's formula); ``inf`` at saturation."""
    rho = rate * service_ms / 1000.0
    if rho >= 1.0:
        return cap_ms
    if rho <= 0.01:
        return 0.0
    return min(cap_ms, service_ms * (1.0 + cv2) * math.log(100.0 * rho) / (2.0 * (1.0 - rho)))


@functools.lru_cache(maxsize=1024)
def speed_of(gpu: GpuPerformance, shape: LlmShape, layout: Layout, input_tokens: int, output_tokens: int,
             correction: SpeedCorrection | None) -> Speed:
    """One Speed per layout and request shape: identical models (and repeated candidates) share its memo."""
    return Speed(gpu, shape, layout, input_tokens, output_tokens, correction)


def batched_tokens(demand: Demand, max_num_seqs: int) -> int:
    """--max-num-batched-tokens: the override, else the prompt rounded up to a power of two within the
    bounds above; never below max_num_seqs (vLLM requires room for one decode token per sequence)."""
    if demand.batched_tokens:
        return max(demand.batched_tokens, max_num_seqs)
    return max(max_num_seqs, prompt_chunk(demand.input_tokens))


def prompt_chunk(input_tokens: int) -> int:
    """The default prefill chunk: the prompt rounded up to a power of two, within the bounds above."""
    chunk = 1 << max(0, math.ceil(math.log2(max(1, input_tokens))))
    return min(MAX_BATCHED_TOKENS, max(MIN_BATCHED_TOKENS, chunk))


def largest(low: int, high: int, ok: Callable[[int], bool]) -> int:
    """The largest ``b`` in [low, high] with ``ok(b)``, for a predicate true up to some point (``low`` is)."""
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if ok(mid) else (low, mid - 1)
    return low


def smallest(low: int, high: int, ok: Callable[[int], bool]) -> int:
    """The smallest ``b`` in [low, high] with ``ok(b)`` (``high`` if none is)."""
    while low < high:
        mid = (low + high) // 2
        low, high = (low, mid) if ok(mid) else (mid + 1, high)
    return low
