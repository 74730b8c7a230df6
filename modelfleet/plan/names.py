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

:func:`name_issues` checks a whole plan: every (kind, namespace, name) once (a second object of the same name
would silently replace the first in ``render`` and ``pulumi up``), the cluster-wide names reserved, and every
name within its limit. A collision names both sides; an overlong user name says how long it may be. Names the
compiler makes from others (Triton servers from pools, the staging objects) are shortened instead, with a
stable hash of the full name (cdk8s's ``Names.toDnsLabel``), so they fit whatever the user wrote.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from ..errors import CompileError, Issue
from .disk import needs_hub_token, staged, weights_of
from .types import FleetPlan, TritonServerPlan, VllmModelPlan

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


# --- the check ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Owner:
    """Who a derived name belongs to, and where a person fixes it (``path``: ``models[3].name``, empty for the
    cluster's own objects)."""

    label: str  # "LLM llama-3-1-8b-instruct", "Triton server triton-g5-xlarge (models a, b)", "the cluster"
    path: str
    rank: int  # which side of a collision is told: the cluster 0 (never), a Triton server 1, an LLM 2
    user_named: bool  # the name is the user's own (an LLM's): refused; else the compiler's: shortened


@dataclass(frozen=True)
class Derived:
    kind: str
    namespace: str
    name: str
    limit: int
    why: str  # what the limit is
    owner: Owner
    primary: bool = False  # the owner's own name, not one derived from it


_WORKLOAD_KINDS = ("Service", "Deployment|Rollout|LeaderWorkerSet", "ServiceAccount", "PodDisruptionBudget",
                   "NetworkPolicy", "ServiceMonitor", "HorizontalPodAutoscaler", "PrometheusRule")
_LABEL = "a DNS-1123 label, and a label value of its pods"
_ROLE = "an IAM role name (64) less the 8 characters Pulumi appends"


def _cluster(plan: FleetPlan) -> Iterator[Derived]:
    owner = Owner("the cluster-wide objects", "", 0, False)
    yield Derived("workload", "", CLUSTER, DNS_LABEL_MAX, _LABEL, owner, True)
    yield Derived("Namespace", "", plan.namespace, DNS_LABEL_MAX, _LABEL, owner)
    yield Derived("DaemonSet", DEVICE_PLUGIN_NAMESPACE, DEVICE_PLUGIN, DNS_LABEL_MAX, _LABEL, owner)
    yield Derived("NetworkPolicy", DEVICE_PLUGIN_NAMESPACE, DEVICE_PLUGIN, DNS_LABEL_MAX, _LABEL, owner)
    yield Derived("ConfigMap", plan.namespace, FLEET_DASHBOARD, DNS_LABEL_MAX, _LABEL, owner)


def _workload(plan: FleetPlan, workload: TritonServerPlan | VllmModelPlan, owner: Owner) -> Iterator[Derived]:
    ns, name = plan.namespace, kube_name(workload)
    yield from (Derived(kind, ns, name, DNS_LABEL_MAX, _LABEL, owner, True) for kind in _WORKLOAD_KINDS)
    yield Derived("workload", "", workload.name, DNS_LABEL_MAX, _LABEL, owner, True)
    yield Derived("ConfigMap", ns, dashboard_name(name), DNS_LABEL_MAX, _LABEL, owner)
    if isinstance(workload, TritonServerPlan) or weights_of(workload).source != "hub":  # it reads S3
        yield Derived("IAM role", "", f"{workload.name}-pod", ROLE_RESOURCE_MAX, _ROLE, owner)
    rollout = workload.rollout
    if rollout is not None and rollout.strategy == "canary":
        yield Derived("AnalysisTemplate", ns, analysis_name(name), DNS_LABEL_MAX, _LABEL, owner)
        if rollout.traffic == "gateway":
            yield Derived("Service", ns, canary_service(name), DNS_LABEL_MAX, _LABEL, owner)
            yield Derived("HTTPRoute", ns, name, DNS_LABEL_MAX, _LABEL, owner, True)


def _llm(plan: FleetPlan, model: VllmModelPlan, owner: Owner) -> Iterator[Derived]:
    ns, name = plan.namespace, model.name
    if model.nodes_per_replica > 1:  # a LeaderWorkerSet: a StatefulSet per group, <name>-<group index>
        last = f"{name}-{max(0, model.max_replicas - 1)}"
        yield Derived("StatefulSet", ns, last, STATEFULSET_NAME_MAX,
                      "the LeaderWorkerSet's StatefulSet names, whose pods' revision-hash label adds 11", owner)
    if needs_hub_token(model):
        yield Derived("Secret", ns, hf_secret_name(name), DNS_LABEL_MAX, _LABEL, owner)
    if staged(model):
        revision = weights_of(model).revision or ""
        yield Derived("ServiceAccount", ns, stage_account(name), DNS_LABEL_MAX, _LABEL, owner)
        yield Derived("IAM role", "", f"{stage_account(name)}-pod", ROLE_RESOURCE_MAX, _ROLE, owner)
        yield Derived("ConfigMap", ns, stage_script_name(name), DNS_LABEL_MAX, _LABEL, owner)
        yield Derived("Job", ns, stage_job_name(name, revision), DNS_LABEL_MAX, _LABEL, owner)
        yield Derived("NetworkPolicy", ns, stage_job_name(name, revision), DNS_LABEL_MAX, _LABEL, owner)


def derived_names(plan: FleetPlan, where: Mapping[str, str]) -> list[Derived]:
    """Every name the plan's render and deploy plan will use, with its owner; ``where``: model name -> the
    field its workload is named by (``models[3].name``, or ``models[3].pool`` for a model in a pool)."""
    names = list(_cluster(plan))
    for server in plan.triton_servers:
        path = where.get(server.models[0], "")
        label = f"Triton server {server.name} (serving {', '.join(server.models)}; {path.rsplit('.', 1)[0]})"
        names += _workload(plan, server, Owner(label, path, 1, False))
    for model in plan.models:
        if isinstance(model, VllmModelPlan) and model.serving == "vllm":
            path = where.get(model.name, "")
            owner = Owner(f"LLM {model.name} ({path.rsplit('.', 1)[0]})", path, 2, True)
            names += [*_workload(plan, model, owner), *_llm(plan, model, owner)]
    return names


def name_issues(plan: FleetPlan, where: Mapping[str, str]) -> list[Issue]:
    """Collisions, reserved names and names past their limits, each located at the side a person renames."""
    names = derived_names(plan, where)
    issues, seen, pairs = [], {}, set()
    for derived in names:
        key = (derived.kind, derived.namespace, derived.name)
        other = seen.setdefault(key, derived)
        if other.owner != derived.owner and (other.owner, derived.owner) not in pairs:  # one issue per pair
            pairs.add((other.owner, derived.owner))
            issues.append(_collision(derived, other))
    told = {i.path for i in issues}
    for derived in names:
        if len(derived.name) > derived.limit and derived.owner.rank and derived.owner.path not in told:
            issues.append(_too_long(derived, names))
            told.add(derived.owner.path)
    return sorted(set(issues), key=lambda i: (i.path, i.message))


def _collision(a: Derived, b: Derived) -> Issue:
    blamed, other = sorted((a, b), key=lambda d: (d.owner.rank, d.primary, d.owner.user_named), reverse=True)
    what = _what(a)
    if other.owner.rank == 0:
        message = f"{blamed.owner.label}: {what} is reserved for {other.owner.label}"
    else:
        message = (f"{blamed.owner.label} and {other.owner.label} would both create {what}: one would silently "
                   "replace the other")
    fix = ("rename the model" if blamed.owner.user_named else
           "rename one of its models or set their pool: to another name (servers are named triton-<pool>)")
    return Issue("", 0, 0, blamed.owner.path, message, fix)


def _what(derived: Derived) -> str:
    if derived.kind == "workload":
        return f"workload name {derived.name} (kubernetes/{derived.name}.yaml)"
    where = f"{derived.namespace}/" if derived.namespace else ""
    return f"{derived.kind.replace('|', ' or ')} {where}{derived.name}"


def _too_long(derived: Derived, names: list[Derived]) -> Issue:
    owner = derived.owner
    own = next(d.name for d in names if d.owner == owner and d.kind == "workload")
    over = max(len(d.name) - d.limit for d in names if d.owner == owner)
    message = (f"{owner.label}: its {_what(derived)} has {len(derived.name)} characters, "
               f"more than {derived.limit} ({derived.why})")
    fix = (f"shorten the name to at most {len(own) - over} characters" if owner.user_named else
           "shorten its models' names or pool, or drop it from deploy.formerServerNames")
    return Issue("", 0, 0, owner.path, message, fix)


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
