"""Measured speed in models.yaml (``profile:``): what a classic model or an LLM was measured to do, and where.

A profile is a measurement, so it says where and when it was taken (``measured_on``, ``measured_at``); the
compiler applies it only where that holds (docs/profiles.md):

* classic models: figures taken on a GPU are scaled to the GPU the plan chooses by the roofline ratio
  (plan/triton_policy.speed_ratio); figures taken on a CPU (``measured_on: cpu``, e.g. the local tritonserver
  of ``modelfleet serve``) are used only for python-backend models, whose ``execute()`` runs on the node's
  CPU either way: a CPU's speed says nothing about a GPU's. ``batches`` is the per-batch-size table that
  ``modelfleet profile`` measures; the compiler picks its batch from it.
* LLMs: the measured block (``measured_on`` ... ``output_tokens_per_s``, all or none) is what
  ``modelfleet profile --llm`` writes from vLLM's own ``vllm bench serve``. The plan reports it, and checks
  its p99 TTFT and TPOT against the SLA when it was taken on the GPU and tensor-parallel size the plan chose.

Dates are ``YYYY-MM-DD`` strings: the loader keeps YAML timestamps as text (spec/yaml_source.py).
"""

from __future__ import annotations

import datetime
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, model_validator

from .tensors import LIST, Frozen
from .triton_options import CpuProfileSpec
from .values import MAX_LATENCY_MS, MAX_OUTPUT_TOKENS_PER_S, MAX_PEAK_RPS, MAX_SEQUENCES, FieldProblem, quantity

# A GPU of the instance catalogue (data/instances.yaml ``gpus:``), by its key. The catalogue is the one GPU
# registry: the spec checks the key's shape, and compile_fleet checks it names a GPU of the catalogue in use
# (plan/hardware/gpus.py), so adding a GPU is a data change.
GpuModel = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,31}$",
                                description="a GPU key of the instance catalogue (data/instances.yaml gpus:), e.g. l40s")]
CPU = "cpu"
MeasuredOn = GpuModel  # a GPU key of the catalogue, or cpu
MAX_BATCHES = 16  # powers of two from 1 to 4,096 are 13 rows; more is not a profile but a log


def _real_date(value: str) -> str:
    try:
        datetime.date.fromisoformat(value)
    except ValueError:
        raise FieldProblem((), f"{value!r} is not a date", "write the day the figures were taken, YYYY-MM-DD") from None
    return value


Date = Annotated[str, Field(pattern=r"^\d{4}-\d{2}-\d{2}$", description="the day the figures were taken, YYYY-MM-DD"),
                 AfterValidator(_real_date)]


# ---------------------------------------------------------------------------------------------- classic models
class BatchProfileSpec(Frozen):
    """One batch size as ``modelfleet profile`` measures it: requests of ``batch_size`` items sent one at a time
    (nothing queued behind them), so ``p99_ms`` is one execution plus its round trip and ``throughput_rps``
    what one instance serves back to back (a lower bound: it idles during each round trip)."""

    batch_size: quantity(1, 4096, "items per request, 1 to 4,096 (Triton's max_batch_size bound)",
                         low_inclusive=True, kind=int)
    throughput_rps: quantity(0.001, MAX_PEAK_RPS, "items (single-item requests) per second one instance served "
                             "at this batch size, measured; 0.001 to 10,000,000", low_inclusive=True)
    p99_ms: quantity(0.01, MAX_LATENCY_MS, "p99 latency of one request of this batch size with nothing queued, "
                     "milliseconds, 0.01 to 600,000", low_inclusive=True)


class ClassicProfileSpec(Frozen):
    """Measured figures (``modelfleet profile``, perf_analyzer or model_analyzer). Without them the compiler
    plans with an execution budget floored by the GPU's datasheet bound, and says so."""

    rps_per_instance: quantity(0.001, MAX_PEAK_RPS, "requests per second one model instance sustains, "
                                                     "measured; 0.001 to 10,000,000", low_inclusive=True,
                                optional=True) = None
    # The GPU the figures were taken on (others are scaled by the roofline ratio), or cpu. a10g: what the
    # catalogues written before measured_on was required were measured on.
    measured_on: MeasuredOn = "a10g"
    # None: not recorded (catalogues written before modelfleet profile); the plan then shows no date.
    measured_at: Optional[Date] = None
    compute_ms: quantity(0.01, MAX_LATENCY_MS, "p99 time of one full batch's execution in milliseconds, 0.01 "
                                                "(a few kernel launches) to 600,000", low_inclusive=True,
                          optional=True) = None
    gpu_memory_gib: quantity(0.001, 1024, "GPU memory one model instance uses, measured, in GiB; 0.001 to 1,024",
                              low_inclusive=True, optional=True) = None
    # The batch size the measurement found most efficient (e.g. a TensorRT engine's optimisation profile):
    # becomes dynamic_batching.preferred_batch_size when it fits max_batch_size. None: Triton's default.
    efficient_batch_size: quantity(1, 4096, "the most efficient batch size measured, 1 to 4,096; Triton then "
                                   "executes a batch of this size as soon as it is formed", low_inclusive=True,
                                   kind=int, optional=True) = None
    # Per batch size, ascending; empty: only the figures above (a full batch's compute_ms and throughput).
    batches: Annotated[tuple[BatchProfileSpec, ...], Field(**LIST, max_length=MAX_BATCHES)] = ()
    cpu: Optional[CpuProfileSpec] = None  # measured on a CPU node (KIND_CPU); see triton_options

    @model_validator(mode="after")
    def _ascending(self) -> ClassicProfileSpec:
        sizes = [b.batch_size for b in self.batches]
        if sizes != sorted(set(sizes)):
            raise FieldProblem(("batches",), f"batch sizes {sizes} are not ascending and distinct",
                               "list each measured batch size once, smallest first")
        return self

    @property
    def measured(self) -> bool:
        """Figures of the model's speed were given (a full batch's time or throughput, or the table)."""
        return bool(self.batches) or self.compute_ms is not None or self.rps_per_instance is not None


# ---------------------------------------------------------------------------------------------- LLMs
LLM_MEASURED = ("measured_on", "measured_at", "tensor_parallel", "concurrency", "input_tokens", "output_tokens",
                "ttft_median_ms", "ttft_p99_ms", "tpot_median_ms", "tpot_p99_ms", "output_tokens_per_s")


class LlmProfileSpec(Frozen):
    """An LLM's speed: the decode speed assumed per sequence, and what ``vllm bench serve`` measured."""

    # Decode speed one sequence sees; converts peak_output_tokens_per_s into concurrent sequences.
    # 30 tokens/s is a typical interactive target for a single stream on a data-centre GPU.
    output_tokens_per_s_per_sequence: quantity(0.1, 10_000, "decode speed one sequence sees, tokens/s, 0.1 to "
                                                "10,000", low_inclusive=True) = 30.0
    # The measurement (all of these or none): where, when, under which load, and what it gave.
    measured_on: Optional[MeasuredOn] = None  # a GPU key of the instance catalogue, or cpu
    measured_at: Optional[Date] = None
    tensor_parallel: Optional[Literal[1, 2, 4, 8]] = None  # GPUs the measured replica spanned
    concurrency: quantity(1, MAX_SEQUENCES, "sequences in flight during the measurement, 1 to 1,000,000",
                          low_inclusive=True, kind=int, optional=True) = None
    input_tokens: quantity(1, 2_097_152, "prompt tokens per request in the measurement", low_inclusive=True,
                           kind=int, optional=True) = None
    output_tokens: quantity(1, 2_097_152, "generated tokens per request in the measurement", low_inclusive=True,
                            kind=int, optional=True) = None
    ttft_median_ms: quantity(0, MAX_LATENCY_MS, "median time to first token, ms", optional=True) = None
    ttft_p99_ms: quantity(0, MAX_LATENCY_MS, "p99 time to first token, ms", optional=True) = None
    tpot_median_ms: quantity(0, MAX_LATENCY_MS, "median time per output token (after the first), ms",
                             optional=True) = None
    tpot_p99_ms: quantity(0, MAX_LATENCY_MS, "p99 time per output token (after the first), ms", optional=True) = None
    output_tokens_per_s: quantity(0, MAX_OUTPUT_TOKENS_PER_S, "generated tokens per second of the whole replica "
                                  "during the measurement", optional=True) = None

    @model_validator(mode="after")
    def _all_or_none(self) -> LlmProfileSpec:
        given = [f for f in LLM_MEASURED if getattr(self, f) is not None]
        if given and len(given) < len(LLM_MEASURED):
            missing = [f for f in LLM_MEASURED if f not in given]
            raise FieldProblem((missing[0],), f"a measured profile needs all of {', '.join(LLM_MEASURED)}; "
                               f"missing {', '.join(missing)}",
                               "write the block `modelfleet profile --llm NAME` prints, or drop the measured fields")
        for kind in ("ttft", "tpot") if given else ():
            if getattr(self, f"{kind}_p99_ms") < getattr(self, f"{kind}_median_ms"):
                raise FieldProblem((f"{kind}_p99_ms",), f"{kind}_p99_ms is below {kind}_median_ms: not a measurement",
                                   "copy the figures from the benchmark's output")
        return self

    @property
    def measured(self) -> bool:
        return self.measured_on is not None
