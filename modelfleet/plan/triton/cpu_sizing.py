"""A classic model's Triton settings on a CPU node (KIND_CPU instances): the queue derivation of triton_policy,
with the measured CPU figures (``profile.cpu``) in place of the GPU's.

What differs from a GPU:

    figures      profile.cpu (rps per instance, a full batch's compute_ms, vCPUs one instance keeps busy),
                 measured on one CPU family; they hold for the families of the same processor (instances.yaml
                 ``cpus``) and for no other: no speed ratio between processors is assumed, so another
                 processor is not a candidate. Without profile.cpu (``device: cpu`` only; the compiler never
                 moves an unmeasured model to a CPU) the GPU path's assumptions apply: a full batch takes a
                 quarter of the p99, batches are half full, one vCPU per instance; the plan warns.
    batch        the type's default (or the override), halved until a full batch fits 0.4 x p99 at the CPU
                 throughput, as on a GPU
    instances    set by the placement (triton/cpu_placement.py): from the node's vCPUs and the models' needs
    queue        queue_policy at the CPU compute time and the instances' drain rate, as on a GPU
    host RAM     every instance's footprint (weights, activations, workspace) lives in the node's RAM
"""

from __future__ import annotations

from dataclasses import dataclass

from ...spec.models import ClassicModelSpec
from ..hardware.instances import CpuType, InstanceCatalogue
from .speed import ASSUMED_BATCH_FILL, EXECUTION_BUDGET_FRACTION
from .speed import batch_within_budget
from .sequences import sequence_instances
from .policy import DEFAULT_MAX_BATCH, ClassicSizing, instance_memory_gib, model_weights_gib, queue_policy

# KIND_CPU instances of one model in one server replica, at most: one per vCPU of a 64-vCPU node (the largest
# type the catalogue lists); beyond, a replica more is the better unit.
MAX_CPU_INSTANCES = 64


@dataclass(kw_only=True, frozen=True)
class CpuFigures:
    """One model's per-instance figures on one processor, and which of them are assumptions."""

    rps_per_instance: float
    compute_ms: float  # a full batch of max_batch_size
    max_batch_size: int
    vcpu_per_instance: int
    assumed: tuple[str, ...]
    basis: str  # what the figures rest on, in one phrase (the plan's speed_basis)
    first_response_ms: float | None = None  # streaming: a full batch to its first responses (triton_policy)


def measured_processor(model: ClassicModelSpec, catalogue: InstanceCatalogue) -> CpuType | None:
    """The processor of the family ``profile.cpu`` was measured on (None: not a CPU family of the catalogue)."""
    assert model.profile.cpu is not None
    family = model.profile.cpu.measured_on
    return next((i.processor for i in catalogue.cpu_instances.values() if i.family == family), None)


def cpu_figures(model: ClassicModelSpec, processor: CpuType, catalogue: InstanceCatalogue) -> CpuFigures | str:
    """The model's figures on ``processor``, or why it has none there (a sentence)."""
    batch = model.overrides.max_batch_size if model.overrides.max_batch_size is not None else (
        DEFAULT_MAX_BATCH[model.type])
    profile = model.profile.cpu
    if profile is None:
        compute = model.sla.p99_latency_ms * EXECUTION_BUDGET_FRACTION
        rps = max(batch, 1) * ASSUMED_BATCH_FILL / (compute / 1000.0)
        return CpuFigures(rps_per_instance=rps, compute_ms=compute, max_batch_size=batch, vcpu_per_instance=1,
                          assumed=(f"compute_ms={compute:g} on the CPU (an execution budget: "
                                   f"{EXECUTION_BUDGET_FRACTION:.0%} of p99)",
                                   f"rps_per_instance={rps:g} on the CPU (half-full batches)",
                                   "vcpu_per_instance=1"),
                          basis=f"UNMEASURED on a CPU (no profile.cpu): a full batch of {max(batch, 1)} is given an "
                          f"execution budget of {compute:g} ms ({EXECUTION_BUDGET_FRACTION:.0%} of the p99), not a "
                          "measurement", first_response_ms=compute if model.streaming else None)
    measured = measured_processor(model, catalogue)
    if measured is None:
        return (f"profile.cpu.measured_on {profile.measured_on!r} is not a CPU family of the instance catalogue "
                f"(it has {', '.join(catalogue.cpu_families())})")
    if measured.key != processor.key:
        return (f"its CPU figures were measured on {profile.measured_on} ({measured.code_name}) and do not apply "
                f"to a {processor.code_name}")
    if model.overrides.max_batch_size is None:
        batch = batch_within_budget(batch, profile.rps_per_instance, model.sla.p99_latency_ms)
    compute = max(profile.compute_ms, round(1000.0 * max(batch, 1) / profile.rps_per_instance, 3))
    return CpuFigures(rps_per_instance=profile.rps_per_instance, compute_ms=compute, max_batch_size=batch,
                      vcpu_per_instance=profile.vcpu_per_instance, assumed=(),
                      basis=f"measured on {profile.measured_on} ({processor.code_name}, KIND_CPU, "
                      f"{profile.vcpu_per_instance} vCPU per instance)",
                      first_response_ms=profile.compute_ms if model.streaming else None)


def min_instances(model: ClassicModelSpec, figures: CpuFigures) -> int:
    """Instances a replica must run whatever its load: the override, or the sequence slots of a stateful
    model (direct strategy), at least one."""
    return min(MAX_CPU_INSTANCES, max(1, sequence_instances(model, figures.max_batch_size)))


def instances_for_load(model: ClassicModelSpec, figures: CpuFigures, target_utilization: float) -> float:
    """Instances the model's peak load keeps busy at the target utilisation (over all replicas)."""
    return model.sla.peak_rps / (figures.rps_per_instance * target_utilization)


def cpu_sizing(model: ClassicModelSpec, figures: CpuFigures, count: int, replicas: int,
               target_utilization: float) -> ClassicSizing:
    """The model's Triton settings with ``count`` KIND_CPU instances in each of ``replicas`` replicas.

    ``gpu_demand`` carries the replicas its load needs at this count (the packer's unit: a CPU server pod),
    ``gpu_memory_gib`` is 0 and ``host_gib`` every instance's footprint."""
    window, timeout, queue = queue_policy(model, figures.max_batch_size, figures.compute_ms,
                                          figures.rps_per_instance * count, figures.first_response_ms)
    demand = instances_for_load(model, figures, target_utilization) / count
    return ClassicSizing(max_batch_size=figures.max_batch_size, instance_count=count,
                         weights_gib=model_weights_gib(model), gpu_memory_gib=0.0, compute_ms=figures.compute_ms,
                         rps_per_instance=figures.rps_per_instance, gpu_demand=demand, max_queue_delay_us=window,
                         queue_timeout_us=timeout, max_queue_size=queue, assumed=figures.assumed,
                         measured=not figures.assumed, basis=figures.basis, bound=None,
                         host_gib=instance_memory_gib(model) * count, first_response_ms=figures.first_response_ms)
