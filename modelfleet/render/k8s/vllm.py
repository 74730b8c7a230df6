"""Kubernetes objects for one vLLM model: a Deployment (one node per replica) or a LeaderWorkerSet with Ray
(pipeline parallel across nodes), Service, PDB, HPA on vllm:num_requests_waiting, metrics, network.

Multi-node: each replica is a group of ``nodes_per_replica`` pods, one per node, each holding all of its
node's GPUs. The leader starts a Ray head and then ``vllm serve`` with the plan's arguments (vLLM waits
for the workers' GPUs to join the Ray cluster); workers join the leader's Ray head and block. A group
lives in one availability zone (pipeline stages talk constantly); groups spread across zones.
"""

from __future__ import annotations

import math
import shlex
from typing import Any

from ...plan.capacity import disk
from ...plan.capacity.disk import downloads_from_hub, from_hub, pod_reads_hub, staged, weights_of
from ...plan.serving.engine_args import HF_CACHE, VLLM_PORT, startup_budget_s
from ...plan.capacity.node_volume import hf_cache_gib
from ...plan.teams import TEAM_LABEL, team_of
from ...plan import names
from ...plan.types import FleetPlan, VllmModelPlan
from . import common as c
from .rollouts import canary_objects, is_canary
from .staging import HF_TOKEN_DIR, stage_objects, wait_container

RAY_PORT = 6379
WAITING_METRIC = "vllm:num_requests_waiting"
LWS_API = "leaderworkerset.x-k8s.io/v1"
GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
# What the download fetches: vLLM loads safetensors (never the repositories' original/*.pth copies, which
# would double a Llama 405B's 756 GiB) and reads the configs, tokenizer and chat template beside them.
DOWNLOAD_PATTERNS = ("*.safetensors", "*.json", "*.model", "*.txt", "*.jinja")
SKIPS = {
    "CKV_K8S_23": "the vLLM image runs as root (no non-root user in vllm/vllm-openai)",
    "CKV_K8S_40": "the vLLM image runs as root (no non-root user in vllm/vllm-openai)",
    "CKV_K8S_22": "vLLM and Ray write torch.compile, Triton-kernel and Ray session files under / at start-up",
}


def hf_secret_name(model: VllmModelPlan) -> str:
    return names.hf_secret_name(model.name)


def hf_secret_metadata(plan: FleetPlan, model: VllmModelPlan) -> dict[str, Any]:
    """The token Secret's metadata; its data is a Pulumi secret, so only the component writes it."""
    meta = c.metadata(hf_secret_name(model), plan, "credentials")
    return {**meta, "labels": {**meta["labels"], TEAM_LABEL: team_of(model.team)}}


def startup_s(model: VllmModelPlan, plan: FleetPlan) -> int:
    """A cold start's budget, from the moment the serving container starts.

    Hub model downloaded by the pod: the ``model-download`` init container has already put the checkpoint on
    the node's disk (outside the probes' clock), so each pod reads its pipeline stage back at its share of the
    disk. Streamed from S3 (an s3:// artifact, or a staged Hub checkpoint): runai_streamer streams it straight
    to the GPUs, and the pod reads what plan/llm/weights.py counts: its share when the replica's ranks split the
    reads (distributed streaming), the whole checkpoint per rank otherwise."""
    if not from_hub(model):
        return startup_budget_s(weights_of(model).pod_read_gib)
    stage = disk.vllm_download_gib(model) / model.pipeline_parallel_size
    return startup_budget_s(stage, disk.pod_disk_gib_s(plan, model.node_group))


def download_s(model: VllmModelPlan, plan: FleetPlan) -> int:
    """The init container's download of a hub checkpoint, at the network rate or the pod's disk share."""
    return math.ceil(disk.vllm_download_gib(model) / disk.pod_download_gib_s(plan, model.node_group))


def _env(model: VllmModelPlan, plan: FleetPlan) -> list[dict[str, str]]:
    env = [{"name": "HF_HOME", "value": HF_CACHE}]
    if pod_reads_hub(model):
        env.append({"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_DIR}/token"})
    if not from_hub(model):
        env.append({"name": "AWS_REGION", "value": plan.region})  # runai_streamer's S3 client
    return env


def _download_container(model: VllmModelPlan, plan: FleetPlan) -> dict[str, Any]:
    """Downloads the Hub checkpoint into the HF cache before vLLM starts, and each pinned LoRA adapter at its
    commit into the folder --lora-modules names. A failed or killed download restarts only this container:
    the emptyDir outlives it, and huggingface_hub resumes the files it had, so a slow download is never
    started over from zero, nor counted against the serving container's startup probe."""
    assert model.pod is not None
    calls = []
    if from_hub(model):
        revision = f"revision={model.revision!r}, " if model.revision else ""  # the commit vLLM's --revision reads
        calls.append(f"snapshot_download({model.artifact!r}, {revision}allow_patterns={list(DOWNLOAD_PATTERNS)!r})")
    calls += [f"snapshot_download({repo!r}, revision={commit!r}, local_dir={folder!r})"
              for folder, repo, commit in model.lora_downloads]
    script = "from huggingface_hub import snapshot_download; " + "; ".join(calls)
    return {"name": "model-download", "image": model.image, "imagePullPolicy": "IfNotPresent",
            "command": ["python3", "-c", script], "env": _env(model, plan),
            "resources": c.resources(model.pod.container("model-download")),
            "securityContext": c.container_security(read_only_root=False, non_root=False),
            "volumeMounts": [{"name": "hf-cache", "mountPath": HF_CACHE},
                             {"name": "hf-token", "mountPath": HF_TOKEN_DIR, "readOnly": True}]}


def _container(model: VllmModelPlan, plan: FleetPlan, command: list[str], leader: bool) -> dict[str, Any]:
    assert model.pod is not None  # the compiler sets every workload's pod
    multi_node = model.nodes_per_replica > 1
    mounts = [{"name": "dshm", "mountPath": "/dev/shm"}, {"name": "hf-cache", "mountPath": HF_CACHE}]
    if pod_reads_hub(model):
        mounts.append({"name": "hf-token", "mountPath": HF_TOKEN_DIR, "readOnly": True})
    container: dict[str, Any] = {
        "name": "vllm", "image": model.image, "imagePullPolicy": "IfNotPresent", "command": command,
        "env": _env(model, plan),
        "resources": c.resources(model.pod.container("vllm"), model.gpus_per_pod),
        "securityContext": c.container_security(read_only_root=False, non_root=False),
        "volumeMounts": mounts,
    }
    if leader:
        container["ports"] = [{"name": "http", "containerPort": VLLM_PORT}]
        container.update(c.http_probes("http", "/health", "/health", startup_s(model, plan), multi_node))
        container["lifecycle"] = c.pre_stop()
    else:
        container["ports"] = [{"name": "ray", "containerPort": RAY_PORT}]
        container.update(_ray_worker_probes(model, plan))
    return container


def _ray_worker_probes(model: VllmModelPlan, plan: FleetPlan) -> dict[str, Any]:
    """A worker is healthy while its leader's Ray head answers (a lost head restarts the whole group)."""
    check = {"exec": {"command": ["/bin/sh", "-c", f"ray health-check --address=$LWS_LEADER_ADDRESS:{RAY_PORT}"]},
             "timeoutSeconds": 10}
    return {"startupProbe": {**check, "periodSeconds": 10, "failureThreshold": max(3, math.ceil(startup_s(model, plan) / 10))},
            "livenessProbe": c.liveness(check, multi_node=True),
            "readinessProbe": {**check, "periodSeconds": 15, "failureThreshold": 3}}


def _pod(model: VllmModelPlan, plan: FleetPlan, container: dict[str, Any], role: str | None) -> dict[str, Any]:
    group = plan.node_group(model.node_group)
    volumes = [c.memory_volume("dshm", int(model.shm_size_gib * 1024**3)), c.disk_volume("hf-cache", hf_cache_gib(model))]
    if pod_reads_hub(model):
        volumes.append({"name": "hf-token", "secret": {"secretName": hf_secret_name(model), "defaultMode": 0o400}})
    pod: dict[str, Any] = {
        "serviceAccountName": model.name, "automountServiceAccountToken": False,
        "securityContext": c.pod_security(None), **c.gpu_placement(group.instance_type, group.capacity_type),
        "containers": [container], "volumes": volumes,
        "terminationGracePeriodSeconds": c.PRE_STOP_S + 60,  # the preStop pause, then in-flight requests finish
    }
    inits = ([wait_container(model, _env(model, plan))] if staged(model) else []) + (
        [_download_container(model, plan)] if downloads_from_hub(model) else [])
    if inits:
        pod["initContainers"] = inits
    if role is not None:  # a group's pods share a zone, whichever lands first
        pod["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": c.selector(model.name)}, "matchLabelKeys": [GROUP_KEY],
             "topologyKey": c.ZONE_KEY}]}}
    if model.spread_zones and role in (None, "leader"):
        match = c.selector(model.name) | ({"role": role} if role else {})
        pod["topologySpreadConstraints"] = c.zone_spread(match, rolling=role is None)
    return pod


def _template(model: VllmModelPlan, plan: FleetPlan, command: list[str], role: str | None) -> dict[str, Any]:
    labels = c.labels(model.name, "vllm") | ({"role": role} if role else {})
    pod = _pod(model, plan, _container(model, plan, command, leader=role != "worker"), role)
    return {"metadata": {"labels": labels, "annotations": c.checkov_skips(SKIPS | c.image_skips(model.image))},
            "spec": pod}


def await_budget_s(model: VllmModelPlan, plan: FleetPlan) -> int:
    return c.await_budget_s(model.replicas, cold_start_s(model, plan))


def cold_start_s(model: VllmModelPlan, plan: FleetPlan) -> int:
    """The download into the pod's emptyDir (a Hub checkpoint not staged) and the engine's start."""
    return (download_s(model, plan) if from_hub(model) else 0) + startup_s(model, plan)


def workload(model: VllmModelPlan, plan: FleetPlan) -> dict[str, Any]:
    annotations = c.checkov_skips(SKIPS | c.image_skips(model.image)) | {c.AWAIT_TIMEOUT: str(await_budget_s(model, plan))}
    meta = c.metadata(model.name, plan, "vllm", annotations)
    assert model.rollout is not None  # served by vLLM itself
    rolling = c.rolling_update(model.rollout)
    if model.nodes_per_replica == 1:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta,
                "spec": {"replicas": model.replicas, "selector": {"matchLabels": c.selector(model.name)},
                         "strategy": {"type": "RollingUpdate", "rollingUpdate": rolling},
                         "template": _template(model, plan, list(model.args), None)}}
    leader = ["/bin/sh", "-c", f"ray start --head --port={RAY_PORT} && exec {shlex.join(model.args)}"]
    worker = ["/bin/sh", "-c", f"until ray start --address=$(LWS_LEADER_ADDRESS):{RAY_PORT} --block; do "
                               "echo waiting for the Ray head; sleep 5; done"]
    return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet", "metadata": meta,
            "spec": {"replicas": model.replicas, "startupPolicy": "LeaderCreated",
                     "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": rolling},
                     "leaderWorkerTemplate": {
                         "size": model.nodes_per_replica, "restartPolicy": "RecreateGroupOnPodRestart",
                         "leaderTemplate": _template(model, plan, leader, "leader"),
                         "workerTemplate": _template(model, plan, worker, "worker")}}}


def autoscaling_metric(model: VllmModelPlan) -> dict[str, Any]:
    """Scale out when a quarter of a replica's batch is waiting: a sequence finishes about every 1/max_num_seqs
    of a request's duration, so the newest waiting request then waits about a quarter of one."""
    return c.pods_metric(WAITING_METRIC, model.max_num_seqs // 4)


def render_vllm_manifests(plan: FleetPlan, model: VllmModelPlan) -> list[dict[str, Any]]:
    """Everything one vLLM model needs but its HF token Secret (a Pulumi secret, made by the component): a
    staged checkpoint's Job first (plan/llm/weights.py), then the serving objects."""
    multi_node = model.nodes_per_replica > 1
    kind, api = ("LeaderWorkerSet", LWS_API) if multi_node else ("Deployment", "apps/v1")
    leaders = c.selector(model.name) | ({"role": "leader"} if multi_node else {})
    scaler = c.autoscaler(model.name, plan, {"apiVersion": api, "kind": kind, "name": model.name},
                          [autoscaling_metric(model)], (model.min_replicas, model.max_replicas))
    staging = stage_objects(plan, model, DOWNLOAD_PATTERNS, hf_secret_name(model)) if staged(model) else []
    objects = [*staging, c.service_account(model.name, plan), workload(model, plan),
               c.service(model.name, plan, "vllm", [("http", VLLM_PORT)], c.await_budget_s(1, cold_start_s(model, plan)), leaders),
               c.group_pdb(model.name, plan) if multi_node else c.pdb(model.name, plan),
               c.network_policy(model.name, plan, [VLLM_PORT], peers=multi_node),
               c.service_monitor(model.name, plan, "http")]
    objects += [scaler] if scaler else []
    if is_canary(model.rollout) and not multi_node:
        return canary_objects(model, plan, objects, ("vllm", [("http", VLLM_PORT)]), VLLM_PORT)
    return objects
