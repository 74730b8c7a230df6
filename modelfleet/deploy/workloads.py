"""The rendered Kubernetes objects in the order ``pulumi up`` can apply them, and each workload's AWS side.

What waits for what (each object names its dependencies; nothing waits for a GPU node it does not run on):

- the Namespace and the kube-system objects (device plugin) wait for nothing but the cluster: they are applied
  while the node groups are still being created (which takes many minutes; the kubernetes provider retries
  a missing namespace for about 30 s only);
- every namespaced object waits for the Namespace; ServiceMonitors and PrometheusRules for the Prometheus operator's
  CRDs, HPAs for
  the metrics adapter (where this stack installs them);
- a Deployment, Rollout (a canary, after its AnalysisTemplate) or LeaderWorkerSet waits for its account, its credentials (pod identity, HF token Secret, S3
  configs), the device plugin, the LWS controller (multi-node), its own node group and, for a staged Hub
  checkpoint, the Job that copied it to S3 (Pulumi waits for a Job to complete);
- that Job waits for its account, its program's ConfigMap, the token Secret and its pod identity;
- its Service (which Pulumi awaits until it has a ready endpoint) and HPA wait for it.
"""

from __future__ import annotations

import base64

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..plan.capacity.disk import needs_hub_token, staged
from ..plan.teams import server_team, team_of
from ..plan.types import FleetPlan, TritonServerPlan, VllmModelPlan
from ..render.iam import pod_identity_trust_policy, stage_write_policy, triton_read_policy, vllm_read_policy
from ..render.k8s import (
    CLUSTER,
    hf_secret_metadata,
    model_repository_bucket,
    model_repository_prefix,
    repository_objects,
    vllm_models,
)
from ..render.k8s import prerequisites as p
from ..render.k8s.staging import stage_account
from ..spec.environment import EnvironmentSpec
from .types import (
    CLUSTER_READY,
    REPOSITORY_KEY,
    AppliedObject,
    PodIdentityDeploy,
    S3ObjectDeploy,
    SecretDeploy,
    TritonDeploy,
    VllmDeploy,
    credentials_key,
    node_group_key,
    object_key,
    release_key,
)

WORKLOAD_KINDS = ("Deployment", "LeaderWorkerSet", "Rollout")
HF_TOKEN_KEY = "token"  # the file the vLLM pod reads (HF_TOKEN_PATH)


def logical_name(obj: Mapping[str, Any]) -> str:
    """Stable: kind, namespace and name, never a position in a list."""
    meta = obj["metadata"]
    return "-".join(part for part in (obj["kind"].lower(), meta.get("namespace", ""), meta["name"]) if part)


@dataclass(frozen=True)
class Context:
    """What a workload's objects may wait for in this stack."""

    namespace: str  # the Namespace's key
    releases: frozenset[str]  # Helm releases this stack installs
    cluster_objects: frozenset[str]  # keys of the device plugin's objects (GPU pods need it; not the exporter)
    cluster_ready: bool  # a created cluster's add-ons (the Pod Identity agent) exist as resources


def _workload_waits(kind: str, workload: str, own: Mapping[str, str], node_group: str, identity: bool,
                    ctx: Context) -> list[str]:
    waits = [object_key(own["ServiceAccount"]), credentials_key(workload), node_group_key(node_group),
             *sorted(ctx.cluster_objects)]
    if identity and ctx.cluster_ready:
        waits.append(CLUSTER_READY)
    if kind == "LeaderWorkerSet" and p.LWS.release in ctx.releases:
        waits.append(release_key(p.LWS.release))
    if kind == "Rollout" and "AnalysisTemplate" in own:  # its analysis runs from the first step
        waits.append(object_key(own["AnalysisTemplate"]))
    if "Job" in own:  # a staged checkpoint: the pods stream what the Job copied (plan/llm/weights.py)
        waits.append(object_key(own["Job"]))
    return waits


def _job_waits(job: Mapping[str, Any], workload: str, identity: bool, ctx: Context) -> list[str]:
    """The staging Job: its own account and program (named in its pod), the token Secret, its pod identity and
    the stack's bucket."""
    pod, namespace = job["spec"]["template"]["spec"], job["metadata"]["namespace"]
    refs = [("ServiceAccount", pod["serviceAccountName"])]
    refs += [("ConfigMap", v["configMap"]["name"]) for v in pod["volumes"] if "configMap" in v]
    waits = [object_key(logical_name({"kind": kind, "metadata": {"name": ref, "namespace": namespace}}))
             for kind, ref in refs]
    waits += [credentials_key(workload), REPOSITORY_KEY]
    if identity and ctx.cluster_ready:
        waits.append(CLUSTER_READY)
    return waits


def _waits(obj: Mapping[str, Any], own: Mapping[str, str], node_group: str, identity: bool,
           ctx: Context, name: str) -> tuple[str, ...]:
    """``own``: kind -> logical name of the workload's objects; ``name``: the workload's in the plan (its
    credentials are registered under it, whatever its objects are named in the cluster)."""
    kind, workload = obj["kind"], next(own[k] for k in WORKLOAD_KINDS if k in own)
    waits = [ctx.namespace]
    if kind in WORKLOAD_KINDS:
        waits += _workload_waits(kind, name, own, node_group, identity, ctx)
    elif kind == "Job":
        waits += _job_waits(obj, name, identity, ctx)
    elif kind in ("Service", "HorizontalPodAutoscaler", "ScaledObject"):
        waits.append(object_key(workload))
    if kind in ("ServiceMonitor", "PrometheusRule") and p.PROMETHEUS_STACK.release in ctx.releases:
        waits.append(release_key(p.PROMETHEUS_STACK.release))
    if kind == "HorizontalPodAutoscaler" and p.PROMETHEUS_ADAPTER.release in ctx.releases:
        waits.append(release_key(p.PROMETHEUS_ADAPTER.release))
    if kind == "ScaledObject" and p.KEDA.release in ctx.releases:
        waits.append(release_key(p.KEDA.release))
    return tuple(waits)


def applied(objects: Sequence[dict[str, Any]], node_group: str, identity: bool, ctx: Context,
            name: str) -> tuple[AppliedObject, ...]:
    """One workload's objects. An autoscaled workload's replicas are set at creation, then left to its HPA."""
    scaled = {(o["spec"]["scaleTargetRef"]["kind"], o["spec"]["scaleTargetRef"]["name"])
              for o in objects if o["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")}
    # kind -> the workload's own object of that kind: its first Service (not a canary's), else the last one (a
    # staged checkpoint's Job and its account come first: the workload's account is the later one)
    own = {o["kind"]: logical_name(o) for o in objects if o["kind"] != "Service" or "Service" not in
           {x["kind"] for x in objects[:objects.index(o)]}}
    return tuple(AppliedObject(name=logical_name(o), manifest=o, waits_for=_waits(o, own, node_group, identity, ctx, name),
                               ignore_changes=_ignored(o, scaled)) for o in objects)


def _ignored(obj: Mapping[str, Any], scaled: set[tuple[str, str]]) -> tuple[str, ...]:
    """What others own once applied: an autoscaled workload's replicas (its HPA), a canary HTTPRoute's
    weights (Argo Rollouts moves them during a rollout)."""
    if (obj["kind"], obj["metadata"]["name"]) in scaled:
        return ("spec.replicas",)
    return ("spec.rules",) if obj["kind"] == "HTTPRoute" else ()


def cluster_objects(manifests: Mapping[str, list[dict[str, Any]]],
                    release_names: frozenset[str] = frozenset()) -> tuple[AppliedObject, ...]:
    """The namespace, the device plugin and a created cluster's DCGM exporter: nothing to wait for but the
    cluster itself; an object in the fleet's namespace (the fleet dashboard's ConfigMap) waits for the Namespace,
    and a ServiceMonitor for the Prometheus stack's release (its CRD) where the stack installs it."""
    objects = manifests[CLUSTER]
    namespace = next((o for o in objects if o["kind"] == "Namespace"), None)

    def waits(o: dict[str, Any]) -> tuple[str, ...]:
        inside = namespace is not None and o["metadata"].get("namespace") == namespace["metadata"]["name"]
        crd = o["kind"] == "ServiceMonitor" and p.PROMETHEUS_STACK.release in release_names
        return ((object_key(logical_name(namespace)),) if inside else ()) + (
            (release_key(p.PROMETHEUS_STACK.release),) if crd else ())
    return tuple(AppliedObject(name=logical_name(o), manifest=o, waits_for=waits(o)) for o in objects)


def s3_object(key: str, content: bytes) -> S3ObjectDeploy:
    """One object of a revision: text as text (configs), other bytes (a warmup sample) base64-encoded."""
    name = key.removeprefix("triton/").replace("/", "-")
    try:
        return S3ObjectDeploy(name=name, key=key, content=content.decode(), retain_on_delete=True)
    except UnicodeDecodeError:
        return S3ObjectDeploy(name=name, key=key, content=base64.b64encode(content).decode(), encoding="base64",
                              retain_on_delete=True)


def triton_server(plan: FleetPlan, server: TritonServerPlan, env: EnvironmentSpec, files: Mapping[str, bytes],
                  manifests: Sequence[dict[str, Any]], ctx: Context) -> TritonDeploy:
    """Its configs as S3 objects under this revision's prefix (kept when a later revision replaces them), a
    role reading its prefix and its artifacts, its objects. A server renamed since it was deployed keeps its
    Pulumi identity: every resource named after it is aliased to its name under each former name (``_former``).
    In a stack that keeps the former names (``kube_name``) its Kubernetes objects, service account and S3 keys
    are those it was deployed with, so nothing is replaced; in one that does not, its configs are a new revision
    like any other change (the old one is kept for pods still reading it)."""
    bucket, prefix = model_repository_bucket(plan, env.deploy), model_repository_prefix(server)
    objects = tuple(s3_object(key, content) for key, content in sorted(repository_objects(files, server).items()))
    identity = PodIdentityDeploy(name=server.name, namespace=plan.namespace, service_account=server.kube_name,
                                 policy=triton_read_policy(plan, server, bucket, prefix),
                                 trust_policy=pod_identity_trust_policy(), aliases=server.former_names)
    own = tuple(o.model_copy(update={"aliases": _former(o.name, server)})
                for o in applied(manifests, server.node_group, True, ctx, server.name))
    return TritonDeploy(name=server.name, team=server_team(plan, server), aliases=server.former_names, objects=objects, identity=identity,
                        manifests=own)


def _former(name: str, server: TritonServerPlan) -> tuple[str, ...]:
    """A resource's logical names under the server's former names (its own name holds the server's)."""
    return tuple(name.replace(server.name, former) for former in server.former_names if server.name in name)


def hf_secret(plan: FleetPlan, model: VllmModelPlan, ctx: Context) -> SecretDeploy:
    meta = hf_secret_metadata(plan, model)
    # It was registered as "<name>-hf-token" before logical names were kind-namespace-name: the alias keeps it.
    return SecretDeploy(name=logical_name({"kind": "Secret", "metadata": meta}), metadata=meta, data_key=HF_TOKEN_KEY,
                        waits_for=(ctx.namespace,), aliases=(meta["name"],))


def vllm_model(plan: FleetPlan, model: VllmModelPlan, manifests: Sequence[dict[str, Any]], ctx: Context) -> VllmDeploy:
    """A model streamed from S3 gets a role reading that prefix; a staged one also a role for its Job, writing
    only its revision's prefix; a model whose pods or Job read the Hub (its checkpoint or LoRA adapters) the
    token Secret."""
    policy = vllm_read_policy(model)
    identity = None if policy is None else PodIdentityDeploy(name=model.name, namespace=plan.namespace,
                                                             service_account=model.name, policy=policy,
                                                             trust_policy=pod_identity_trust_policy())
    stage = PodIdentityDeploy(name=stage_account(model), namespace=plan.namespace, service_account=stage_account(model),
                              policy=stage_write_policy(model), trust_policy=pod_identity_trust_policy(),
                              policy_name="write") if staged(model) else None
    secret = hf_secret(plan, model, ctx) if needs_hub_token(model) else None  # LoRA adapters come from the Hub too
    return VllmDeploy(name=model.name, team=team_of(model.team), identity=identity, stage_identity=stage,
                      hf_secret=secret, hf_token_required=model.hub_token_required, manifests=applied(manifests, model.node_group, identity is not None, ctx, model.name))


def workloads(plan: FleetPlan, env: EnvironmentSpec, files: Mapping[str, bytes],
              manifests: Mapping[str, list[dict[str, Any]]], ctx: Context) -> tuple[tuple[TritonDeploy, ...], tuple[VllmDeploy, ...]]:
    servers = tuple(triton_server(plan, s, env, files, manifests[s.name], ctx) for s in plan.triton_servers)
    return servers, tuple(vllm_model(plan, m, manifests[m.name], ctx) for m in vllm_models(plan))
