"""Per-model Triton settings derived from the SLA: batching, queue policy, footprint and throughput.

The queue derivation (documented in README "How queue timeouts are derived"):

    p99 budget L  =  batching window  +  time queued  +  one batch execution
    max_queue_delay_us  = min(L / 10, 5 ms), at least 100 us   (a short window: Triton's own advice)
    queue_timeout_us    = L - compute - window                  (a request that waited longer cannot make
                                                                 its SLA; REJECT it instead of serving late)
    max_queue_size      = requests the model can drain within the timeout at full speed, at least one batch
                                                                (anything beyond would time out anyway)

Triton's default queue policy has ``default_timeout_microseconds: 0`` (never) and an unbounded queue, so
requests a client has already given up on are still executed: every config we render sets all three.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .errors import Issue
from .instances import GpuType, InstanceCatalogue
from .plan import Decision
from .sizing import CLASSIC_ACTIVATION_FACTOR, CLASSIC_WORKSPACE_GIB, weights_gib
from .spec import ClassicModelSpec

# Max batch size when the catalogue does not say: large for cheap per-item models (tabular, embeddings),
# small for heavy inputs (audio, detection), following Triton model_analyzer's usual search results.
DEFAULT_MAX_BATCH = {"vision": 32, "nlp": 16, "embedding": 64, "tabular": 256, "audio": 8,
                     "recommender": 128, "other": 8}
# Without a measured profile a full batch is assumed to take a quarter of the p99 budget.
ASSUMED_COMPUTE_FRACTION = 0.25
# ...and batches are assumed half full on average when estimating throughput.
ASSUMED_BATCH_FILL = 0.5
MAX_BATCH_WINDOW_US = 5_000
MIN_BATCH_WINDOW_US = 100

BACKENDS = {
    "onnx": ("onnxruntime", "onnxruntime_onnx"),
    "tensorrt": ("tensorrt", "tensorrt_plan"),
    "pytorch": ("pytorch", "pytorch_libtorch"),
    "tensorflow": ("tensorflow", "tensorflow_savedmodel"),
    "openvino": ("openvino", ""),
    "python": ("python", ""),
}


@dataclass(frozen=True)
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
    count = model.overrides.instance_count or 1
    assumed: list[str] = []
    compute_ms = model.profile.compute_ms
    if compute_ms is None:
        compute_ms = model.sla.p99_latency_ms * ASSUMED_COMPUTE_FRACTION
        assumed.append(f"compute_ms={compute_ms:g} ({ASSUMED_COMPUTE_FRACTION:.0%} of p99)")
    rps = _rps_on(model, gpu, catalogue, max(batch, 1), compute_ms, assumed)
    window, timeout, queue = queue_policy(model, batch, compute_ms, rps * count)
    demand = model.sla.peak_rps / (rps * count * target_utilization)
    return ClassicSizing(batch, count, model_weights_gib(model), instance_memory_gib(model) * count, compute_ms,
                         rps, demand, window, timeout, queue, tuple(assumed))


def _rps_on(model: ClassicModelSpec, gpu: GpuType, catalogue: InstanceCatalogue, batch: int,
            compute_ms: float, assumed: list[str]) -> float:
    """Measured requests/s scaled by FP16 TFLOPS from the GPU it was measured on; else from batch/compute."""
    measured = model.profile.rps_per_instance
    if measured is None:
        estimate = batch * ASSUMED_BATCH_FILL / (compute_ms / 1000.0)
        assumed.append(f"rps_per_instance={estimate:g} (half-full batches of {batch} every {compute_ms:g} ms)")
        return estimate
    reference = _gpu(catalogue, model.profile.measured_on)
    return measured * gpu.fp16_tflops / reference.fp16_tflops if reference else measured


def _gpu(catalogue: InstanceCatalogue, key: str) -> GpuType | None:
    return next((i.gpu for i in catalogue.instances.values() if i.gpu.key == key), None)


def queue_policy(model: ClassicModelSpec, batch: int, compute_ms: float, rps: float) -> tuple[int, int, int]:
    """(max_queue_delay_us, queue_timeout_us, max_queue_size) from the SLA; see the module docstring."""
    budget_us = int(model.sla.p99_latency_ms * 1000)
    window = model.overrides.max_queue_delay_us
    if window is None:
        window = max(MIN_BATCH_WINDOW_US, min(MAX_BATCH_WINDOW_US, budget_us // 10 // 100 * 100))
    timeout = model.overrides.queue_timeout_us
    if timeout is None:
        timeout = (budget_us - int(compute_ms * 1000) - window) // 100 * 100
    size = model.overrides.max_queue_size or max(batch, 1, math.ceil(rps * timeout / 1e6))
    return window, timeout, size


def check_budget(model: ClassicModelSpec, sizing: ClassicSizing, index: int) -> Issue | None:
    """A CompileError issue when the SLA leaves no time to queue at all."""
    if sizing.queue_timeout_us > 0:
        return None
    return Issue("", 0, 0, f"models[{index}].sla.p99_latency_ms",
                 f"{model.name}: p99 {model.sla.p99_latency_ms:g} ms leaves no queueing budget after "
                 f"{sizing.compute_ms:g} ms of compute and a {sizing.max_queue_delay_us} us batching window",
                 "raise sla.p99_latency_ms, lower overrides.max_batch_size or measure profile.compute_ms")


def triton_decision(model: ClassicModelSpec, sizing: ClassicSizing) -> Decision:
    return Decision(
        choice=f"timeout {sizing.queue_timeout_us} us, window {sizing.max_queue_delay_us} us, "
               f"queue <= {sizing.max_queue_size}",
        reason=f"p99 {model.sla.p99_latency_ms:g} ms = window {sizing.max_queue_delay_us / 1000:g} ms + queue "
               f"{sizing.queue_timeout_us / 1000:g} ms + compute {sizing.compute_ms:g} ms; the queue holds what "
               f"{sizing.instance_count} instance(s) at {sizing.rps_per_instance:.0f} req/s drain within the timeout",
    )
