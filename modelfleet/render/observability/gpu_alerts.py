"""The GPU alerts of a workload, from the DCGM exporter's series of the GPUs its pods hold (gpu_metrics.py):

- its fullest GPU's memory near full: past it an allocation fails (Triton: a model instance, a larger batch's
  buffers; vLLM: CUDA graphs and activations beside the KV cache it reserved) and requests fail with it;
- a GPU reporting an XID error (the driver's error report: a double-bit ECC error, a GPU fallen off the bus,
  a kernel's illegal access): the GPU, or the CUDA context of the pod on it, may be gone.

The third GPU-side alert, batches far below the compiled maximum at peak, is Triton's TritonBatchFarBelowCompiled
(alerts.py): it reads Triton's own counters, not the GPU's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...plan.types import TritonServerPlan, VllmModelPlan
from . import gpu_metrics as g
from . import slo_queries as q

if TYPE_CHECKING:
    from .alerts import RuleContext

TRITON_MEMORY_FULL = 0.95  # Triton's models take what they need as they load and batch: 95% leaves no room to grow


def memory_full(workload: TritonServerPlan | VllmModelPlan) -> float:
    """The share of a GPU's memory past which the workload is near full. vLLM reserves
    ``--gpu-memory-utilization`` of the card up front, so it sits there by design: near full is halfway from that
    reservation to the whole card (0.9 -> 0.95)."""
    if isinstance(workload, VllmModelPlan):
        return round(workload.gpu_memory_utilization + (1 - workload.gpu_memory_utilization) / 2, 4)
    return TRITON_MEMORY_FULL


def holds_gpus(workload: TritonServerPlan | VllmModelPlan) -> bool:
    return isinstance(workload, VllmModelPlan) or (workload.device == "gpu" and workload.gpus_per_replica > 0)


def gpu_rules(ctx: RuleContext, engine: str, workload: TritonServerPlan | VllmModelPlan, groups: bool) -> list[dict[str, Any]]:
    """GPU memory near full and XID errors on the workload's GPUs (none for a workload on CPU nodes)."""
    if not holds_gpus(workload):
        return []
    gpus = g.workload_gpus(ctx.plan.namespace, q.workload_pods(ctx.job, groups))
    full, labels = memory_full(workload), {"severity": "ticket", "slo": "saturation"}
    reserved = (f" vLLM reserves --gpu-memory-utilization = {workload.gpu_memory_utilization:g} of it up front, so "
                f"the alert is halfway from there to the whole card." if isinstance(workload, VllmModelPlan) else "")
    return [
        ctx.rule(f"{engine}GpuMemoryNearFull", f"{g.memory_used_ratio(gpus)} > {full:g}", "10m", labels,
                 f"{ctx.workload}: a GPU's memory {{{{ $value | humanizePercentage }}}} used",
                 f"A GPU of {ctx.workload}'s pods has had over {full:.0%} of its memory in use for 10 minutes "
                 f"(DCGM_FI_DEV_FB_USED over used + free).{reserved} The next allocation (a model instance, a "
                 "larger batch, a CUDA graph) fails, and requests fail with it."),
        ctx.rule(f"{engine}GpuXidError", f"{g.xid_errors(gpus)} > 0", "1m", {**labels, "severity": "page"},
                 f"{ctx.workload}: {{{{ $value }}}} GPU(s) reporting an XID error",
                 f"A GPU that {ctx.workload}'s pods hold reports an XID error (DCGM_FI_DEV_XID_ERRORS: the last "
                 "one's code, non-zero). Some leave the GPU unusable until its node is replaced (48: double-bit "
                 "ECC, 79: fallen off the bus, 95: uncontained ECC); others kill the pod's CUDA context (13, 31, 43)."),
    ]
