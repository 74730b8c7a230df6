"""Every name modelfleet derives for Kubernetes and AWS, decided here once, and checked here once.

Render, the deploy plan and the components read these functions; none of them appends a suffix of its own.
A workload (a Triton server, a vLLM model) owns its name ``W`` and the names derived from it:

    W                       its ServiceAccount, Deployment (Rollout, LeaderWorkerSet), Service, PDB,
                            NetworkPolicy, ServiceMonitor, HPA, PrometheusRule (and HTTPRoute with a gateway)
    W-dashboard             its dashboard's ConfigMap
    W-slo                   a canary's AnalysisTemplate;  W-canary: its canary Service (with a gateway)
    W-hf-token              the Hub token Secret of an LLM that reads the Hub
    W-stage, W-stage-program, W-stage-<commit>
                            a staged checkpoint's service account, program ConfigMap, Job and its NetworkPolicy
    W-pod, W-stage-pod      the pod identity roles (Pulumi adds 8 characters to a role's name)

``plan/name_checks.py`` checks a whole plan against these names and limits (collisions, reserved names,
lengths); :func:`refuse_twice` is the second line of defence in ``render`` and the deploy plan. Names the
compiler makes from others (Triton servers from pools, the staging objects) are shortened, with a stable hash
of the full name (cdk8s's ``Names.toDnsLabel``), so they fit whatever the user wrote.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

from ..errors import CompileError, Issue
from .types import TritonServerPlan, VllmModelPlan

_UNSAFE = re.compile(r"[^a-z0-9-]+")

# --- limits ---------------------------------------------------------------------------------------------------
DNS_LABEL_MAX = 63  # Service, Namespace, Job names; every label value (each workload's name is one)
# A StatefulSet's pods carry controller-revision-hash: <set>-<hash of up to 10>, a label value: 63 - 11.
STATEFULSET_NAME_MAX = 52
# Pulumi auto-names a role "<resource name>-<7 random characters>"; IAM role names have at most 64.
ROLE_RESOURCE_MAX = 64 - 8
DASHBOARD, SLO, CANARY, HF_TOKEN, STAGE = "dashboard", "slo", "canary", "hf-token", "stage"
# What a workload's own name may have: room for the suffixes appended as they are ("-dashboard") and for its
# pod identity's role ("-pod"). A name the compiler derives (a Triton server's) is shortened to fit it.
WORKLOAD_NAME_MAX = min(DNS_LABEL_MAX - len(f"-{DASHBOARD}"), ROLE_RESOURCE_MAX - len("-pod"))

# --- names of the cluster-wide objects ----------------------------------------------------------------------
CLUSTER = "cluster"  # the group of the cluster-wide objects (kubernetes/cluster.yaml): no workload may be named so
FLEET_DASHBOARD = "modelfleet-fleet-dashboard"
DEVICE_PLUGIN, DEVICE_PLUGIN_NAMESPACE = "nvidia-device-plugin", "kube-system"


def stable_name(prefix: str, name: str, limit: int = DNS_LABEL_MAX) -> str:
    """``prefix-name`` as a DNS-1123 label; too long -> truncated with an 8-hex hash of the full name."""
    full = _UNSAFE.sub("-", f"{prefix}-{name}".lower()).strip("-")
    if len(full) <= limit:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{full[: limit - 9].rstrip('-')}-{digest}"


def suffixed(name: str, suffix: str, limit: int = DNS_LABEL_MAX) -> str:
    """``name-suffix`` within ``limit``; too long -> ``name`` cut, with an 8-hex hash of the whole, before the
    suffix (which stays readable): two long names differing past the cut still differ."""
    full = f"{name}-{suffix}"
    if len(full) <= limit:
        return full
    digest = hashlib.sha256(full.encode()).hexdigest()[:8]
    return f"{name[: limit - len(suffix) - 10].rstrip('-')}-{digest}-{suffix}"


def node_group_name(instance_type: str, capacity_type: str, cpu: bool = False) -> str:
    """One node group per instance type and capacity type: ``gpu-g6e-12xlarge-od`` / ``...-spot``; a CPU
    group of KIND_CPU servers: ``cpu-c7i-xlarge-od``."""
    suffix = "spot" if capacity_type == "spot" else "od"
    return stable_name("cpu" if cpu else "gpu", f"{instance_type.replace('.', '-')}-{suffix}")


def triton_server_name(pool: str, member: str | None = None) -> str:
    """``triton-<pool>`` or ``triton-<pool>-<member>`` (plan/packing.py), short enough for every suffix."""
    return stable_name("triton" if member is None else f"triton-{pool}", pool if member is None else member,
                       limit=WORKLOAD_NAME_MAX)


def dashboard_name(workload: str) -> str:
    return FLEET_DASHBOARD if workload == CLUSTER else f"{workload}-{DASHBOARD}"


def analysis_name(workload: str) -> str:
    return f"{workload}-{SLO}"


def canary_service(workload: str) -> str:
    return f"{workload}-{CANARY}"


def hf_secret_name(model: str) -> str:
    return f"{model}-{HF_TOKEN}"


def stage_account(model: str) -> str:
    """The staging Job's service account, and its pod identity's name (its role is ``<this>-pod``)."""
    return suffixed(model, STAGE, ROLE_RESOURCE_MAX - len("-pod"))


def stage_script_name(model: str) -> str:
    return suffixed(model, f"{STAGE}-program")


def stage_job_name(model: str, revision: str) -> str:
    """Named by the commit: a new revision is a new Job (its name is its pods' job-name label)."""
    return suffixed(model, f"{STAGE}-{revision[:12]}")


def kube_name(workload: TritonServerPlan | VllmModelPlan) -> str:
    """What the cluster knows a workload by: a Triton server's ``kube_name`` (its former name in a stack that
    keeps them), a vLLM model's name."""
    return workload.kube_name if isinstance(workload, TritonServerPlan) else workload.name


# --- the second line of defence ---------------------------------------------------------------------------------


def refuse_twice(entries: Iterable[tuple[tuple[str, ...], str]], what: str) -> None:
    """Raise a CompileError naming both producers of any key produced twice (``entries``: (key, producer)).
    ``render`` and the deploy plan call it before anything is written or created: whatever :func:`name_issues`
    missed is refused, never silently overwritten."""
    first: dict[tuple[str, ...], str] = {}
    issues = []
    for key, producer in entries:
        if key in first:
            issues.append(Issue("", 0, 0, "", f"{what}: {' '.join(p for p in key if p)} would be set twice, by "
                                f"{first[key]} and by {producer}; the second would silently replace the first",
                                "a compiler bug (the spec should have refused the names): report it"))
        else:
            first[key] = producer
    if issues:
        raise CompileError(issues)
