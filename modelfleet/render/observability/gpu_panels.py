"""The GPU rows of the dashboards, from the DCGM exporter's series (gpu_metrics.py): a workload's GPUs (the ones
its pods hold) on its own dashboard, and every GPU node group's GPUs (held or idle) on the fleet overview."""

from __future__ import annotations

from ...plan.types import FleetPlan, TritonServerPlan, VllmModelPlan
from . import gpu_metrics as g
from . import slo_queries as q
from .gpu_alerts import holds_gpus, memory_full
from .panels import Panel, Query, Row

SOURCE = "DCGM exporter, scraped every 15 s"


def workload_gpu_row(plan: FleetPlan, workload: TritonServerPlan | VllmModelPlan, job: str, groups: bool) -> Row | None:
    """Utilisation, memory used and free, power and XID errors of the GPUs the workload's pods hold."""
    if not holds_gpus(workload):
        return None
    gpus = g.workload_gpus(plan.namespace, q.workload_pods(job, groups))
    full = memory_full(workload)
    return Row("GPUs", (
        Panel("GPU utilisation", "timeseries", "Share of time a kernel ran on the workload's GPUs: their average and "
              f"the busiest ({SOURCE}).", (Query(g.gpu_util(gpus), "average"), Query(g.gpu_util(gpus, "max"), "busiest")),
              "percentunit"),
        Panel("GPU memory", "timeseries", "Framebuffer in use and free, over the workload's GPUs.",
              (Query(g.memory_mib(gpus, "used"), "used"), Query(g.memory_mib(gpus, "free"), "free")), "mbytes", width=6),
        Panel("Fullest GPU's memory", "timeseries", f"The fullest GPU's memory in use; the line is {full:.0%}, where "
              "the GpuMemoryNearFull alert fires.", (Query(g.memory_used_ratio(gpus), "used"),), "percentunit", full),
        Panel("GPU power", "timeseries", "Power the workload's GPUs draw.", (Query(g.power_w(gpus), "watts"),),
              "watt", width=12),
        Panel("GPUs with an XID error", "timeseries", "The workload's GPUs whose last XID error is non-zero "
              "(GpuXidError pages on any).", (Query(f"{g.xid_errors(gpus)} or vector(0)", "GPUs"),), "short", width=12),
    ))


def node_group_row(plan: FleetPlan) -> Row | None:
    """Per GPU node group (the ServiceMonitor's ``node_group`` label): utilisation, memory, power, XID errors."""
    groups = sorted(grp.name for grp in plan.node_groups if grp.device == "gpu")
    if not groups:
        return None

    def each(query) -> tuple[Query, ...]:
        return tuple(Query(query(g.node_group_gpus(name)), name) for name in groups)
    return Row("GPUs by node group", (
        Panel("GPU utilisation", "timeseries", "Average share of time a kernel ran, over each group's GPUs (idle "
              "ones included: a low figure is capacity paid for and unused).", each(g.gpu_util), "percentunit", width=6),
        Panel("Fullest GPU's memory", "timeseries", "Each group's fullest GPU's memory in use.",
              each(g.memory_used_ratio), "percentunit", width=6),
        Panel("GPU power", "timeseries", "Power each group's GPUs draw, in watts.", each(g.power_w), "watt", width=6),
        Panel("GPUs with an XID error", "timeseries", "GPUs in each group whose last XID error is non-zero.",
              each(lambda sel: f"{g.xid_errors(sel)} or vector(0)"), "short", width=6),
    ))
