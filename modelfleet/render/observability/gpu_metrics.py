"""The GPUs' own series, from NVIDIA's DCGM exporter, and the PromQL the GPU alerts and panels ask of them.

Every ``DCGM_FI_*`` name used here is one of the counters the exporter publishes by default: its
``etc/default-counters.csv``, shipped unchanged as ``modelfleet/data/dcgm-exporter-default-counters.csv``
(dcgm-exporter 4.5.3-4.8.2; tests/observability/test_gpu_metrics.py holds it equal to the copy in the shared
reference). :func:`counter` refuses any other name, so a panel cannot name a series the exporter does not send.

Which GPUs: the exporter runs with ``DCGM_EXPORTER_KUBERNETES=true`` and its ServiceMonitor honours its labels, so
a GPU a pod holds carries that pod's ``namespace`` and ``pod``: a workload's GPUs are selected by its pods, as
kube-state-metrics' panels select them (``slo_queries.workload_pods``). A node group's GPUs carry
``node_group``, which the ServiceMonitor copies from the node's ``modelfleet.io/node-group`` label
(render/k8s/dcgm_exporter.py; a joined cluster's exporter must do the same: docs/operations/observability.md).
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from ..k8s.common import NODE_GROUP_METRIC_LABEL as NODE_GROUP

CATALOGUE_FILE = Path(__file__).resolve().parents[2] / "data" / "dcgm-exporter-default-counters.csv"

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # percent of time a kernel ran
FB_USED, FB_FREE = "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE"  # MiB
POWER = "DCGM_FI_DEV_POWER_USAGE"  # W
XID = "DCGM_FI_DEV_XID_ERRORS"  # the last XID error's code (0: none since the exporter started)


def parse_counters(text: str) -> dict[str, str]:
    """Field name -> Prometheus type of every counter a dcgm-exporter counters file enables (``#`` lines are
    comments, including counters shipped disabled)."""
    found = {}
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, kind = (part.strip() for part in line.split(",")[:2])
            found[name] = kind
    return found


@cache
def default_counters() -> dict[str, str]:
    return parse_counters(CATALOGUE_FILE.read_text())


def counter(name: str) -> str:
    """``name``, if the exporter publishes it by default (a label-only field is no series)."""
    if default_counters().get(name) not in ("gauge", "counter"):
        raise ValueError(f"{name} is not a series dcgm-exporter publishes by default ({CATALOGUE_FILE.name})")
    return name


def gpu_util(selector: str, how: str = "avg") -> str:
    """The GPUs' utilisation, 0 to 1 (``how``: avg or max over them)."""
    return f"({how}({counter(GPU_UTIL)}{selector}) / 100)"


def memory_used_ratio(selector: str) -> str:
    """The fullest GPU's framebuffer in use, 0 to 1 (used over used + free: what a process can still allocate)."""
    used, free = f"{counter(FB_USED)}{selector}", f"{counter(FB_FREE)}{selector}"
    return f"max({used} / ({used} + {free}))"


def memory_mib(selector: str, which: str) -> str:
    """Framebuffer MiB in use (``used``) or free (``free``), summed over the GPUs."""
    return f"sum({counter(FB_USED if which == 'used' else FB_FREE)}{selector})"


def power_w(selector: str) -> str:
    return f"sum({counter(POWER)}{selector})"


def xid_errors(selector: str) -> str:
    """How many of the GPUs report an XID error (their last one non-zero); no result when none does."""
    return f"count({counter(XID)}{selector} > 0)"


def workload_gpus(namespace: str, pods: str) -> str:
    """The selector of the GPUs a workload's pods hold (``pods``: slo_queries.workload_pods' anchored regex)."""
    return f'{{namespace="{namespace}",pod=~"{pods}"}}'


def node_group_gpus(group: str) -> str:
    """The selector of every GPU of a node group's nodes, held or idle."""
    return f'{{{NODE_GROUP}="{group}"}}'
