"""Per-model Triton settings derived from the SLA: batching, queue policy, footprint and throughput.

The queue derivation (documented in docs/concepts/decisions.md, "How queue timeouts are derived"):

    p99 budget L  =  time queued (batching window included)  +  one batch in progress  +  its own batch
    max_batch_size      = the type's default, halved until a full batch runs in <= 0.4 L at the measured rate
                          (so at least a fifth of the budget is left to queue in)
    compute             = a full batch's time on the target GPU: measured compute_ms scaled from the GPU it was
                          measured on by min(FP16 TFLOPS ratio, memory bandwidth ratio) (a roofline: a model
                          is bound by one of the two, and which one is unknown, so the slower ratio is
                          taken), and never less than batch / requests-per-second; unmeasured, an execution
                          budget of L / 4 never below the datasheet bound (triton/speed.py, triton/bounds.py)
    queue_timeout_us    = L - 2 x compute                       (a request that waited longer cannot make
                                                                 its SLA; REJECT it instead of serving late)
    max_queue_delay_us  = min(L / 10, 5 ms, timeout / 2), at least 100 us  (a short window: Triton's advice)
    max_queue_size      = 256 MiB of queued inputs, at least what the instances drain within the timeout,
                          at most 65,536 (memory protection; the timeout sheds load)

A streaming (decoupled) model's SLA is its first response: a batch in progress holds its instance until its
streams end (``compute`` above, which the throughput bound makes the whole streams' time when
``rps_per_instance`` counts whole streams), but a request's own batch counts only to its first responses, the
measured ``compute_ms``:

    queue_timeout_us    = L - compute - first_response          (streaming; proven on the real server:
                                                                 tests/engines/test_triton_features.py)

Why two batches and no separate window, measured on the real tritonserver 2.51 (tests/engines):
Triton's queue timeout runs from the moment a request is enqueued, so the batching window is spent inside
it (a window longer than the timeout rejects even a lone request on an idle server); and the timeout is
only checked while a request is still queued: a batch the scheduler has formed waits, unchecked, for the
batch in progress on its instance, then runs. The worst answered request therefore took the timeout, one
execution it waited behind and its own.

Triton's default queue policy has ``default_timeout_microseconds: 0`` (never) and an unbounded queue, so
requests a client has already given up on are still executed: every config we render sets all three.

Overrides (``max_queue_delay_us``, ``queue_timeout_us``, ``max_batch_size``) are taken as written, but a set
whose window + timeout + compute exceeds the p99 on every allowed GPU is a CompileError located at the
override: a request could wait past the SLA and still be served. The SLA is the user's own statement of the
latency they accept; to accept a longer one, raise ``sla.p99_latency_ms`` (there is no other escape hatch).

Throughput moves between GPU models by the same roofline factor. It is an estimate: small models are often
bound by the host (request handling, kernel launches), which no GPU ratio captures, so a profile measured on
the target GPU (``profile.measured_on``) always wins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import Issue
from ...spec.models import ClassicModelSpec
from ...spec.profiles import CPU
from .bounds import BatchBound, bound_issue
from .speed import classic_speed, gpu_by_key, speed_ratio
from ..hardware.instances import GpuType, InstanceCatalogue
from .sequences import sequence_instances
from ..sizing import CLASSIC_ACTIVATION_FACTOR, CLASSIC_WORKSPACE_GIB, weights_gib
from ..types import Decision

# Max batch size when the catalogue does not say: large for cheap per-item models (tabular, embeddings),
# small for heavy inputs (audio, detection), following Triton model_analyzer's usual search results.
DEFAULT_MAX_BATCH = {"vision": 32, "nlp": 16, "embedding": 64, "tabular": 256, "audio": 8,
                     "recommender": 128, "other": 8}
MAX_BATCH_WINDOW_US = 5_000
# The queue bound is memory protection, not the load shedder (the timeout is): Triton drops timed-out
# requests only when its scheduler reaches them, so under sustained overload any bound fills, and an earlier
# bench/overload.py saw tritonserver 2.51's batcher idle ~0.5 s between batches behind a queue kept full by
# a tight bound. So the bound is sized by memory: 256 MiB of queued inputs per model, never less than what
# the instances drain within the timeout, never more than 65,536 requests.
QUEUE_MEMORY_BUDGET_BYTES = 256 * 1024**2
MAX_QUEUE_SIZE = 65_536
VARIABLE_DIM_ASSUMED = 512  # elements assumed for a -1 dimension when sizing a queued request
STRING_ELEMENT_BYTES = 4096  # bytes assumed per string element (e.g. an encoded image or a sentence)
DTYPE_SIZES = {"bool": 1, "uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "fp16": 2, "bf16": 2, "uint32": 4,
               "int32": 4, "fp32": 4, "uint64": 8, "int64": 8, "fp64": 8, "string": STRING_ELEMENT_BYTES}
# Executions an answered request may take beyond its time queued: the batch in progress, then its own.
EXECUTIONS_IN_WORST_CASE = 2
MIN_BATCH_WINDOW_US = 100

BACKENDS = {
    "onnx": ("onnxruntime", "onnxruntime_onnx"),
    "tensorrt": ("tensorrt", "tensorrt_plan"),
    "pytorch": ("pytorch", "pytorch_libtorch"),
    "tensorflow": ("tensorflow", "tensorflow_savedmodel"),
    "openvino": ("openvino", ""),
    "python": ("python", ""),
}


@dataclass(kw_only=True, frozen=True)
class ClassicSizing:
    """What the packer and the renderer need to know about one classic model on one GPU type."""

    max_batch_size: int
    instance_count: int
    weights_gib: float
    gpu_memory_gib: float  # all instances
    compute_ms: float
    rps_per_instance: float  # on this GPU type
    gpu_demand: float  # GPUs of compute at peak load, after target utilisation
    max_queue_delay_us: int
    queue_timeout_us: int
    max_queue_size: int
    assumed: tuple[str, ...]  # which figures are assumptions (warned once)
    measured: bool  # compute_ms and rps_per_instance rest on a measurement that applies to this GPU
    basis: str  # what they rest on (classic_speed)
    bound: BatchBound | None  # the datasheet bound of a full batch on this GPU (None: no params declared)
    # Host RAM the model holds while serving: a python-backend model lives in its stub process; the other
    # backends copy their weights to the GPU and keep only a transient host copy while loading.
    host_gib: float = 0.0
    # A streaming model's full batch to its first responses (the measured compute_ms): its own execution as
    # its SLA counts it. None: a model answers once, so its own batch is compute_ms like the one in progress.
    first_response_ms: float | None = None

    @property
    def own_ms(self) -> float:
        """What a request's own batch counts toward its p99: its first responses, or the whole batch."""
        return self.compute_ms if self.first_response_ms is None else self.first_response_ms


def model_weights_gib(model: ClassicModelSpec) -> float:
    if model.size.memory_gib is not None:
        return model.size.memory_gib
    return weights_gib(model.size.params or 0, model.size.dtype or "fp32")


def instance_memory_gib(model: ClassicModelSpec) -> float:
    """One instance's GPU footprint: measured, or weights + activations + workspace."""
    if model.profile.gpu_memory_gib is not None:
        return model.profile.gpu_memory_gib
    weights = model_weights_gib(model)
    if model.size.memory_gib is not None:
        return weights  # declared memory is the whole footprint
    return weights * (1 + CLASSIC_ACTIVATION_FACTOR) + CLASSIC_WORKSPACE_GIB


def size_classic(model: ClassicModelSpec, gpu: GpuType, catalogue: InstanceCatalogue,
                 target_utilization: float) -> ClassicSizing:
    batch = model.overrides.max_batch_size if model.overrides.max_batch_size is not None else (
        DEFAULT_MAX_BATCH[model.type])
    speed = classic_speed(model, gpu, catalogue, batch)
    batch, compute_ms, rps = speed.batch, speed.compute_ms, speed.rps
    first = first_response_ms(model, gpu, catalogue, compute_ms)
    count = sequence_instances(model, batch)  # the override; for a stateful model, enough sequence slots
    window, timeout, queue = queue_policy(model, batch, compute_ms, rps * count, first)
    demand = model.sla.peak_rps / (rps * count * target_utilization)
    weights = model_weights_gib(model)
    return ClassicSizing(max_batch_size=batch, instance_count=count, weights_gib=weights,
                         gpu_memory_gib=instance_memory_gib(model) * count, compute_ms=compute_ms,
                         rps_per_instance=rps, gpu_demand=demand, max_queue_delay_us=window, queue_timeout_us=timeout,
                         max_queue_size=queue, assumed=speed.assumed, measured=speed.measured, basis=speed.basis,
                         bound=speed.bound, host_gib=weights * count if model.framework == "python" else 0.0,
                         first_response_ms=first)


def first_response_ms(model: ClassicModelSpec, gpu: GpuType, catalogue: InstanceCatalogue,
                      compute_ms: float) -> float | None:
    """A streaming model's full batch to its first responses on ``gpu``: the measured ``profile.compute_ms``
    moved to ``gpu`` like the rest, before the throughput bound stretches ``compute_ms`` to whole streams
    (classic_speed); measured otherwise (a batch table) or not at all, ``compute_ms`` itself. None: not
    streaming (a model that answers once counts its whole batch)."""
    if not model.streaming:
        return None
    profile = model.profile
    applies = profile.measured and (profile.measured_on != CPU or model.framework == "python")
    if not applies or profile.batches or profile.compute_ms is None:
        return compute_ms
    reference = gpu_by_key(catalogue, profile.measured_on)
    ratio = speed_ratio(reference, gpu) if reference else 1.0
    return min(compute_ms, round(profile.compute_ms / ratio, 3))


def queue_policy(model: ClassicModelSpec, batch: int, compute_ms: float, rps: float,
                 first_response_ms: float | None = None) -> tuple[int, int, int]:
    """(max_queue_delay_us, queue_timeout_us, max_queue_size) from the SLA; see the module docstring.
    ``first_response_ms``: a streaming model's own batch to its first responses (None: ``compute_ms``)."""
    budget_us = int(model.sla.p99_latency_ms * 1000)
    timeout = model.overrides.queue_timeout_us
    if timeout is None:
        own = compute_ms if first_response_ms is None else first_response_ms
        timeout = (budget_us - int(compute_ms * 1000) - int(own * 1000)) // 100 * 100
    window = model.overrides.max_queue_delay_us
    if window is None:
        window = max(MIN_BATCH_WINDOW_US, min(MAX_BATCH_WINDOW_US, budget_us // 10, timeout // 2) // 100 * 100)
    drainable = max(batch, 1, math.ceil(rps * max(timeout, 0) / 1e6))
    by_memory = QUEUE_MEMORY_BUDGET_BYTES // request_bytes(model)
    size = model.overrides.max_queue_size or min(MAX_QUEUE_SIZE, max(drainable, by_memory))
    return window, timeout, size


def request_bytes(model: ClassicModelSpec) -> int:
    """Bytes one queued request holds: its inputs, with -1 dims and strings at documented assumptions."""
    total = 0
    for tensor in model.inputs:
        elements = math.prod(VARIABLE_DIM_ASSUMED if d == -1 else d for d in tensor.dims)
        total += elements * DTYPE_SIZES[tensor.dtype]
    return max(total, 1)


OVERRIDES_IN_BUDGET = ("queue_timeout_us", "max_queue_delay_us", "max_batch_size")


def worst_case_us(sizing: ClassicSizing) -> int:
    """The slowest answered request: queued up to the timeout, then one batch in progress and its own (to its
    first responses, for a streaming model)."""
    return max(sizing.queue_timeout_us, 0) + int(sizing.compute_ms * 1000) + int(sizing.own_ms * 1000)


def overrun_us(model: ClassicModelSpec, sizing: ClassicSizing) -> int:
    """How far the worst answered request exceeds the p99 (<= 0: within it)."""
    return worst_case_us(sizing) - int(model.sla.p99_latency_ms * 1000)


def within_budget(model: ClassicModelSpec, sizing: ClassicSizing) -> bool:
    """A queueing budget is left, the batching window fits inside it (else Triton rejects even a lone
    request), and no override stretches the worst case past the p99."""
    return (sizing.queue_timeout_us > 0 and sizing.max_queue_delay_us < sizing.queue_timeout_us
            and overrun_us(model, sizing) <= 0)


def check_budget(model: ClassicModelSpec, sizing: ClassicSizing, index: int) -> Issue | None:
    """A CompileError issue when the SLA leaves no time to queue, or the overrides break it; located at the
    override that stretches it (the first of OVERRIDES_IN_BUDGET written), else at the p99."""
    if within_budget(model, sizing):
        return None
    field = next((f for f in OVERRIDES_IN_BUDGET if getattr(model.overrides, f) is not None), None)
    path = f"models[{index}]." + (f"overrides.{field}" if field else "sla.p99_latency_ms")
    p99, compute = model.sla.p99_latency_ms, sizing.compute_ms
    impossible = bound_issue(model.name, p99, sizing.bound, path, EXECUTIONS_IN_WORST_CASE) if (
        not sizing.measured and sizing.bound is not None) else None
    if impossible is not None:
        return impossible
    if sizing.queue_timeout_us <= 0 or (field is None and sizing.max_queue_delay_us >= sizing.queue_timeout_us):
        return Issue("", 0, 0, path, f"{model.name}: p99 {p99:g} ms leaves no queueing budget after "
                     f"{_executions(sizing)} (the batch in progress and its own, batch of {sizing.max_batch_size})",
                     f"raise sla.p99_latency_ms above {math.ceil(compute + sizing.own_ms + 1)} ms, "
                     "lower overrides.max_batch_size or measure profile.compute_ms")
    if sizing.max_queue_delay_us >= sizing.queue_timeout_us:
        return Issue("", 0, 0, path, f"{model.name}: the batching window of {sizing.max_queue_delay_us} us is "
                     f"not shorter than the queue timeout of {sizing.queue_timeout_us} us; Triton counts the "
                     "window inside the timeout, so every request that waits out the window is rejected",
                     f"lower overrides.max_queue_delay_us to at most {sizing.queue_timeout_us // 2 // 100 * 100}, "
                     "or remove it (the compiler derives it from the p99)")
    total_ms = worst_case_us(sizing) / 1000
    return Issue("", 0, 0, path, f"{model.name}: the overrides break the p99 of {p99:g} ms: queue timeout "
                 f"{sizing.queue_timeout_us / 1000:g} ms + the batch in progress {compute:g} ms + its own batch "
                 f"{sizing.own_ms:g} ms (batch of {sizing.max_batch_size}) = {total_ms:g} ms, so a request could "
                 "wait past its SLA and still be served", _budget_fix(model, sizing, field, total_ms))


def _executions(sizing: ClassicSizing) -> str:
    if sizing.first_response_ms is None:
        return f"two executions of {sizing.compute_ms:g} ms"
    return (f"a batch of streams in progress ({sizing.compute_ms:g} ms) and its own first responses "
            f"({sizing.first_response_ms:g} ms)")


def _budget_fix(model: ClassicModelSpec, sizing: ClassicSizing, field: str | None, total_ms: float) -> str:
    room = int(model.sla.p99_latency_ms * 1000) - int(sizing.compute_ms * 1000) - int(sizing.own_ms * 1000)
    room = room // 100 * 100 if field == "queue_timeout_us" else 0
    first = (f"lower overrides.{field} to at most {room}" if room > 0 else
             f"lower or remove overrides.{field} (without it the compiler derives it from the p99)")
    window = model.overrides.max_queue_delay_us
    if room > 0 and window is not None and window >= room:
        first += f" and overrides.max_queue_delay_us below it (at most {room // 2 // 100 * 100})"
    return (f"{first}; or, if {math.ceil(total_ms)} ms is the latency you accept, raise sla.p99_latency_ms "
            "to it")


def triton_decision(model: ClassicModelSpec, sizing: ClassicSizing) -> Decision:
    relation = ">=" if overrun_us(model, sizing) < -100 else "="
    compute = sizing.compute_ms
    own = (f"its own batch {compute:.1f} ms" if sizing.first_response_ms is None else
           f"its own first responses {sizing.own_ms:.1f} ms (streaming: the SLA is the first response; a batch in "
           "progress holds its instance until its streams end)")
    return Decision(
        choice=f"timeout {sizing.queue_timeout_us} us, window {sizing.max_queue_delay_us} us, "
               f"queue <= {sizing.max_queue_size}",
        reason=f"p99 {model.sla.p99_latency_ms:g} ms {relation} queue timeout {sizing.queue_timeout_us / 1000:g} ms "
               f"(the {sizing.max_queue_delay_us / 1000:g} ms batching window counts inside it) + the batch in "
               f"progress {compute:.1f} ms + {own} (batch of {sizing.max_batch_size}); "
               f"the queue bound keeps queued inputs within {QUEUE_MEMORY_BUDGET_BYTES // 1024**2} MiB and above "
               f"what {sizing.instance_count} instance(s) at {sizing.rps_per_instance:.0f} req/s drain within the "
               "timeout",
    )
