"""Kubernetes objects for one Triton server: identity, Deployment, Service, PDB, HPA, metrics, network.

The model repository is assembled in an emptyDir at /models before Triton starts: an init container
copies the server's config.pbtxt objects and each model's version folders from where the artifact already
lives, then tritonserver runs with the plan's arguments.

The configs live under a content-addressed prefix, ``triton/<server>/<revision>/``, the revision being the
first 16 hex digits of the repository's SHA-256: a new revision is new keys, and the old keys are kept
(the program retains them), so a pod of the old revision that restarts mid-rollout, or a rollback, reads
the configs its template names, never the newest ones.
"""

from __future__ import annotations

import hashlib
import math
import shlex
from collections.abc import Mapping
from typing import Any

from ...plan.capacity import disk
from ...plan.serving.engine_args import (
    MODEL_REPOSITORY_DIR,
    TRITON_GRPC_PORT,
    TRITON_HTTP_PORT,
    TRITON_METRICS_PORT,
    startup_budget_s,
)
from ...plan.capacity.node_volume import repository_gib
from ...plan.types import FleetPlan, PodPlan, TritonModelPlan, TritonServerPlan
from ...spec.digest import DIGEST_PIPELINE
from . import callers
from . import common as c
from . import keda
from .rollouts import canary_objects, is_canary

TRITON_UID = 1000  # the image's triton-server user (the image has no USER line, so the pod says it)
REPOSITORY_DIGEST = "modelfleet.io/repository-sha256"
PENDING_METRIC = "nv_inference_pending_request_count"
MIN_SHM_BYTES = 64 * 1024**2  # Triton's own shared memory for its internal tensors, python or not
SKIPS = {"CKV_K8S_40": "the Triton image's own user triton-server is uid 1000; a higher uid has no home or libraries"}


def rendered_prefix(server: TritonServerPlan) -> str:
    """Where ``render`` writes the server's config.pbtxt files (under the name the plan shows)."""
    return f"triton/{server.name}"


def model_repository_prefix(server: TritonServerPlan) -> str:
    """Its revisions' S3 prefix: under the name the cluster knows it by (``kube_name``: a stack that keeps the
    former names keeps its keys, so a rename writes no new objects)."""
    return f"triton/{server.kube_name}"


def repository_files(files: Mapping[str, bytes], server: TritonServerPlan) -> dict[str, bytes]:
    """Render path -> content: what ``render`` wrote under triton/<server>/ (configs, vLLM-backend model.json),
    but not server.json, which describes the Deployment rather than the repository."""
    prefix = rendered_prefix(server) + "/"
    return {key: content for key, content in sorted(files.items())
            if key.startswith(prefix) and key != f"{prefix}server.json"}


def repository_digest(objects: Mapping[str, bytes]) -> str:
    """Changes with any config: on the pod template, it rolls the pods (Triton reads configs at start only).
    Over the paths inside the server's directory, so a renamed server keeps its revision (and its aliases
    carry its S3 objects over)."""
    digest = hashlib.sha256()
    for key, content in sorted(objects.items()):
        inner = key.split("/", 2)[2] if key.count("/") >= 2 else key
        digest.update(f"{inner}\0{len(content)}\0".encode() + content)
    return digest.hexdigest()


def revision_prefix(server: TritonServerPlan, repository: Mapping[str, bytes]) -> str:
    """The S3 prefix of this revision of the server's configs (content-addressed: see the module docstring)."""
    return f"{model_repository_prefix(server)}/{repository_digest(repository)[:16]}"


def repository_objects(files: Mapping[str, bytes], server: TritonServerPlan) -> dict[str, bytes]:
    """S3 key -> content of this revision: each rendered file under the revision's prefix."""
    repository = repository_files(files, server)
    prefix, revision = rendered_prefix(server), revision_prefix(server, repository)
    return {revision + key.removeprefix(prefix): content for key, content in repository.items()}


def sync_script(bucket: str, server: TritonServerPlan, plan: FleetPlan, revision: str) -> str:
    """The init container's shell: the revision's configs, then each model's pinned version folders (its whole
    prefix when unpinned), each pinned digest checked (the pod fails rather than serve other bytes)."""
    steps = [f"aws s3 sync --only-show-errors {shlex.quote(f's3://{bucket}/{revision}/')} {MODEL_REPOSITORY_DIR}/"]
    for name in server.models:
        model = plan.model(name)
        if isinstance(model, TritonModelPlan):
            steps += _model_copy(model)
    return "set -eu\n" + "\n".join(steps) + "\n"


def _model_copy(model: TritonModelPlan) -> list[str]:
    source, target = model.artifact.rstrip("/"), f"{MODEL_REPOSITORY_DIR}/{model.name}"
    if not model.versions:
        return [f"aws s3 sync --only-show-errors --exclude config.pbtxt {shlex.quote(source + '/')} "
                f"{shlex.quote(target + '/')}"]
    steps = [f"aws s3 sync --only-show-errors {shlex.quote(f'{source}/{v}/')} {shlex.quote(f'{target}/{v}/')}"
             for v in model.versions]
    if model.version_sha256:
        steps.append(digest_check(f"{target}/{model.versions[0]}", model.version_sha256, model.name))
    return steps


def digest_check(directory: str, sha256: str, name: str) -> str:
    """Shell: the folder's content digest (``folder_digest``'s definition) must be ``sha256``."""
    return (f"got=$(cd {shlex.quote(directory)} && {DIGEST_PIPELINE}); [ \"$got\" = {sha256} ] || "
            f"{{ echo \"{name}: version folder digest $got, models.yaml pins {sha256}\" >&2; exit 1; }}")


def startup_s(server: TritonServerPlan, plan: FleetPlan) -> int:
    """Loading the models from /models, at the pod's share of its node's disk (or the network rate)."""
    return startup_budget_s(disk.triton_download_gib(server, plan), disk.pod_download_gib_s(plan, server.node_group))


def copy_s(server: TritonServerPlan, plan: FleetPlan) -> int:
    """The init container's copy of the artifacts (before the startup probe's clock starts)."""
    return math.ceil(disk.triton_download_gib(server, plan) / disk.pod_download_gib_s(plan, server.node_group))


def shm_bytes(server: TritonServerPlan, plan: FleetPlan) -> int:
    """Every python model instance's stub maps an arena of ``--backend-config=python,shm-default-byte-size``
    and grows it on demand: twice the plan's python_shm_bytes (the arenas of all its stubs), and Triton's own
    floor."""
    return max(MIN_SHM_BYTES, 2 * server.python_shm_bytes)


def _container(server: TritonServerPlan, plan: FleetPlan, pod: PodPlan) -> dict[str, Any]:
    return {
        "name": "triton", "image": server.image, "imagePullPolicy": "IfNotPresent",
        "command": [server.args[0]], "args": list(server.args[1:]),
        "env": [{"name": "HOME", "value": "/tmp"}],  # the root filesystem is read-only
        "ports": [{"name": "http", "containerPort": TRITON_HTTP_PORT}, {"name": "grpc", "containerPort": TRITON_GRPC_PORT},
                  {"name": "metrics", "containerPort": TRITON_METRICS_PORT}],
        "resources": c.resources(pod.container("triton"), server.gpus_per_replica),
        **c.http_probes("http", "/v2/health/live", "/v2/health/ready", startup_s(server, plan)),
        "lifecycle": c.pre_stop(),
        "securityContext": c.container_security(read_only_root=True, non_root=True),
        "volumeMounts": [{"name": "models", "mountPath": MODEL_REPOSITORY_DIR}, {"name": "dshm", "mountPath": "/dev/shm"},
                         {"name": "tmp", "mountPath": "/tmp"}],
    }


def _init_container(script: str, image: str, region: str, pod: PodPlan) -> dict[str, Any]:
    return {"name": "model-repository", "image": image, "imagePullPolicy": "IfNotPresent",
            "command": ["/bin/sh", "-c", script],
            "resources": c.resources(pod.container("model-repository"), cpu_limit_millis=1000),
            "securityContext": c.container_security(read_only_root=True, non_root=True),
            "env": [{"name": "AWS_REGION", "value": region}, {"name": "HOME", "value": "/tmp"}],
            "volumeMounts": [{"name": "models", "mountPath": MODEL_REPOSITORY_DIR}, {"name": "tmp", "mountPath": "/tmp"}]}


def _pod(server: TritonServerPlan, plan: FleetPlan, bucket: str, aws_cli_image: str, revision: str,
         proxy_image: str) -> dict[str, Any]:
    group = plan.node_group(server.node_group)
    assert server.pod is not None  # the compiler sets every workload's pod
    pod: dict[str, Any] = {
        "serviceAccountName": server.kube_name, "automountServiceAccountToken": False,
        "securityContext": c.pod_security(TRITON_UID),
        **(c.cpu_placement if server.device == "cpu" else c.gpu_placement)(group),
        "initContainers": [_init_container(sync_script(bucket, server, plan, revision), aws_cli_image, plan.region,
                                           server.pod)],
        "containers": [_container(server, plan, server.pod)],
        "volumes": [c.disk_volume("models", repository_gib(server, plan)), c.memory_volume("dshm", shm_bytes(server, plan)),
                    c.disk_volume("tmp", 1)],
        # the preStop pause, then Triton drains in flight requests, then the kubelet kills
        "terminationGracePeriodSeconds": c.PRE_STOP_S + _exit_timeout_s(server) + 10,
    }
    if plan.callers:  # the proxy counting them (callers.py)
        pod["containers"].append(callers.container(server, server.pod, proxy_image))
        pod["volumes"].append(callers.volume(server))
    if server.spread_zones:
        pod["topologySpreadConstraints"] = c.zone_spread(c.selector(server.kube_name))
    return pod


def proxy_config(server: TritonServerPlan, plan: FleetPlan) -> str:
    """The caller proxy's configuration for this server (callers.py): Triton's ports, its drain time."""
    return callers.proxy_config(plan.callers, triton_http=TRITON_HTTP_PORT, triton_grpc=TRITON_GRPC_PORT,
                                hard_stop_s=callers.hard_stop_s(_exit_timeout_s(server)))


def _exit_timeout_s(server: TritonServerPlan) -> int:
    flag = next(a for a in server.args if a.startswith("--exit-timeout-secs="))
    return int(flag.split("=", 1)[1])


def await_budget_s(server: TritonServerPlan, plan: FleetPlan) -> int:
    return c.await_budget_s(server.replicas, copy_s(server, plan) + startup_s(server, plan))


def deployment(server: TritonServerPlan, plan: FleetPlan, bucket: str, aws_cli_image: str,
               repository: Mapping[str, bytes], proxy_image: str = callers.IMAGE) -> dict[str, Any]:
    images = (server.image, *((proxy_image,) if plan.callers else ()))
    skips = c.checkov_skips(SKIPS | {k: v for image in images for k, v in c.image_skips(image).items()})
    meta = c.metadata(server.kube_name, plan, "triton", {**skips, c.AWAIT_TIMEOUT: str(await_budget_s(server, plan))})
    annotations = {**skips, REPOSITORY_DIGEST: repository_digest(repository),
                   **c.disruption_annotations(plan.node_group(server.node_group))}
    if plan.callers:  # the proxy reads its configuration at start: a new one rolls the pods
        annotations[callers.CONFIG_DIGEST] = callers.config_digest(proxy_config(server, plan))
    template = {"metadata": {"labels": c.labels(server.kube_name, "triton"), "annotations": annotations},
                "spec": _pod(server, plan, bucket, aws_cli_image, revision_prefix(server, repository), proxy_image)}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
            "spec": {"replicas": server.replicas, "selector": {"matchLabels": c.selector(server.kube_name)},
                     "strategy": {"type": "RollingUpdate", "rollingUpdate": c.rolling_update(server.rollout)},
                     "template": template}}


def autoscaling_metrics(server: TritonServerPlan, plan: FleetPlan) -> list[dict[str, Any]]:
    """One metric per model: scale out when its queue holds half of what its instances drain within its
    queue timeout; past that, queued requests start to be rejected (REJECT after the timeout)."""
    metrics = []
    for name in server.models:
        model = plan.model(name)
        assert isinstance(model, TritonModelPlan)  # LLMs are served by vLLM's own Deployment
        drained = model.rps_per_instance * model.instance_count * model.queue_timeout_us / 1e6
        metrics.append(c.pods_metric(PENDING_METRIC, math.floor(drained / 2), {"model": name}))
    return metrics


def queue_triggers(server: TritonServerPlan, plan: FleetPlan) -> list[dict[str, Any]]:
    """The HPA's metrics as KEDA triggers (a server scaling to zero): each model's pending requests."""
    return [keda.trigger(keda.queue_query(PENDING_METRIC, plan.namespace, server.kube_name, {"model": m["pods"]["metric"]
                                                                                            ["selector"]["matchLabels"]["model"]}),
                         int(m["pods"]["target"]["averageValue"]), f"pending-{i}")
            for i, m in enumerate(autoscaling_metrics(server, plan))]


def service(server: TritonServerPlan, plan: FleetPlan, ports: list[c.ServicePort]) -> dict[str, Any]:
    """Its ClusterIP Service; a server of stateful models keeps each client IP on one pod, where its sequences
    live (plan/triton/sequences.py says why and for how long)."""
    obj = c.service(server.kube_name, plan, "triton", ports, await_budget_s(server, plan))
    if server.session_affinity is not None:
        obj["spec"] |= {"sessionAffinity": "ClientIP", "sessionAffinityConfig": {
            "clientIP": {"timeoutSeconds": server.session_affinity.timeout_s}}}
    return obj


def render_triton_manifests(plan: FleetPlan, server: TritonServerPlan, bucket: str, aws_cli_image: str,
                            repository: Mapping[str, bytes], proxy_image: str = callers.IMAGE) -> list[dict[str, Any]]:
    """Everything one Triton server needs, in apply order. ``repository``: its rendered files
    (``repository_files``), which ``bucket`` holds under the revision's prefix."""
    name = server.kube_name  # the cluster's name for it; the modelfleet.io/server label says the plan's
    target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    ports: list[c.ServicePort] = [("http", TRITON_HTTP_PORT), ("grpc", TRITON_GRPC_PORT),
                                  ("metrics", TRITON_METRICS_PORT)]
    open_ports = [TRITON_HTTP_PORT, TRITON_GRPC_PORT, TRITON_METRICS_PORT]
    counted: list[dict[str, Any]] = []
    if plan.callers:  # clients reach Triton through the proxy that counts them; its counters are scraped too
        ports = [(n, p, callers.PROXIED[n]) if n in callers.PROXIED else (n, p) for n, p in ports]
        ports.append((callers.METRICS_PORT_NAME, callers.CALLER_METRICS_PORT))
        open_ports += [callers.CALLER_HTTP_PORT, callers.CALLER_GRPC_PORT, callers.CALLER_METRICS_PORT]
        counted = [callers.config_map(server, plan, proxy_config(server, plan))]
    scaler = (keda.scaled_object(name, plan, target, queue_triggers(server, plan), server.max_replicas)
              if server.min_replicas == 0 else
              c.autoscaler(name, plan, target, autoscaling_metrics(server, plan), (server.min_replicas, server.max_replicas)))
    objects = [c.service_account(name, plan), *counted,
               deployment(server, plan, bucket, aws_cli_image, repository, proxy_image),
               service(server, plan, ports),
               c.pdb(name, plan),
               c.network_policy(name, plan, open_ports),
               c.service_monitor(name, plan, "metrics", (callers.monitor_endpoint(),) if plan.callers else ())]
    objects += [scaler] if scaler else []
    if is_canary(server.rollout):
        return canary_objects(server, plan, objects, ("triton", ports), TRITON_HTTP_PORT)
    return objects
