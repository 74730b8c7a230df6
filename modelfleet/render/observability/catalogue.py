"""Every alert modelfleet generates: its name, severity, what it protects, and where its runbook is.

One entry per alert name, whatever the workload: docs/runbooks/alerts.md has a section per entry (a test holds the
two together), and each rule's ``runbook_url`` points at that section.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Engine = Literal["triton", "vllm"]
PAGE, TICKET = "page", "ticket"
RUNBOOKS_PAGE = "runbooks/alerts"  # docs/runbooks/alerts.md


@dataclass(frozen=True)
class AlertKind:
    name: str
    engine: Engine
    severity: str  # page: someone acts now; ticket: within the working day
    slo: Literal["availability", "latency", "saturation"]
    protects: str  # the SLA figure, as the docs name it

    @property
    def anchor(self) -> str:
        """The runbook section's anchor (MkDocs' slug of a heading that is the alert's name)."""
        return self.name.lower()


# An LLM declares its load as one of three fields (spec/models.py LlmSlaSpec).
LLM_LOAD = "sla.peak_concurrent_sequences, sla.peak_output_tokens_per_s or sla.peak_requests_per_s"

KINDS = (
    AlertKind("TritonErrorBudgetBurnFast", "triton", PAGE, "availability", "sla.availability"),
    AlertKind("TritonErrorBudgetBurnSlow", "triton", TICKET, "availability", "sla.availability"),
    AlertKind("TritonLatencyP99AboveSla", "triton", PAGE, "latency", "sla.p99_latency_ms"),
    AlertKind("TritonQueueNearBound", "triton", TICKET, "saturation", "sla.p99_latency_ms (the queue timeout)"),
    AlertKind("TritonResponseCacheHitRateDrop", "triton", TICKET, "saturation", "sla.peak_rps (capacity planned "
                                                                                  "with the cache)"),
    AlertKind("TritonBatchFarBelowCompiled", "triton", TICKET, "saturation", "sla.peak_rps (the packing's "
                                                                                 "full batches at peak)"),
    AlertKind("TritonReplicasAtMax", "triton", TICKET, "saturation", "sla.peak_rps"),
    AlertKind("TritonPodsNotReady", "triton", TICKET, "saturation", "sla.availability (replicas)"),
    AlertKind("TritonGpuMemoryNearFull", "triton", TICKET, "saturation", "sla.availability (allocations fail)"),
    AlertKind("TritonGpuXidError", "triton", PAGE, "saturation", "sla.availability (the GPU may be lost)"),
    AlertKind("VllmErrorBudgetBurnFast", "vllm", PAGE, "availability", "sla.availability"),
    AlertKind("VllmErrorBudgetBurnSlow", "vllm", TICKET, "availability", "sla.availability"),
    AlertKind("VllmTtftP99AboveSla", "vllm", PAGE, "latency", "sla.p99_ttft_ms"),
    AlertKind("VllmTpotP99AboveSla", "vllm", PAGE, "latency", "sla.p99_tpot_ms"),
    AlertKind("VllmQueueSaturated", "vllm", TICKET, "saturation", LLM_LOAD),
    AlertKind("VllmKvCacheNearFull", "vllm", TICKET, "saturation", "sla.max_context_tokens"),
    AlertKind("VllmReplicasAtMax", "vllm", TICKET, "saturation", LLM_LOAD),
    AlertKind("VllmPodsNotReady", "vllm", TICKET, "saturation", "sla.availability (replicas)"),
    AlertKind("VllmGpuMemoryNearFull", "vllm", TICKET, "saturation", "sla.availability (allocations fail)"),
    AlertKind("VllmGpuXidError", "vllm", PAGE, "saturation", "sla.availability (the GPU may be lost)"),
)
BY_NAME = {kind.name: kind for kind in KINDS}


def runbook_url(name: str, docs_url: str | None) -> str:
    """The alert's runbook section on the published site, or its path in the repository without one."""
    anchor = BY_NAME[name].anchor
    if docs_url is None:
        return f"docs/{RUNBOOKS_PAGE}.md#{anchor}"
    return f"{docs_url.rstrip('/')}/{RUNBOOKS_PAGE}/#{anchor}"
