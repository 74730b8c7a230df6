"""The whole plan's derived names, checked once before anything is rendered (names: plan/names.py).

Every (kind, namespace, name) once: a second object of the same name would silently replace the first in
``render`` and ``pulumi up``. The names of the cluster-wide objects are reserved (``cluster``, the fleet
dashboard's ConfigMap), and every name is within its limit. A collision is located at the side a person renames
(an LLM before a Triton server, whose name the compiler made) and names the other side; an overlong user name
says how long it may be.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from ..errors import Issue
from .capacity.disk import needs_hub_token, staged, weights_of
from .names import (
    CLUSTER,
    DEVICE_PLUGIN,
    DEVICE_PLUGIN_NAMESPACE,
    DNS_LABEL_MAX,
    FLEET_DASHBOARD,
    ROLE_RESOURCE_MAX,
    STATEFULSET_NAME_MAX,
    analysis_name,
    canary_service,
    dashboard_name,
    hf_secret_name,
    kube_name,
    stage_account,
    stage_job_name,
    stage_script_name,
)
from .types import FleetPlan, TritonServerPlan, VllmModelPlan


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
