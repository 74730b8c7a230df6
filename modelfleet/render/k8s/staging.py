"""The staging of a pinned Hub checkpoint into S3 (plan/llm/weights.py): a Job per revision, its service account
(whose pod identity may write only that revision's prefix), the program it runs (engines/stage_weights.py,
from a ConfigMap), and the init container that holds a serving pod until the copy is complete.

The Job is named by the commit, so a new revision is a new Job (Pulumi waits for it to complete before it
updates the workload: deploy/workloads.py) and the old prefix stays for pods still reading it and for a
rollback. It runs on any node but the fleet's own (the system nodes of a created cluster, the platform's
nodes of a joined one): it needs no GPU, and the fit check keeps the fleet's nodes for the serving pods.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ...plan import names
from ...plan.serving.engine_args import DOWNLOAD_GIB_PER_S
from ...plan.capacity.disk import weights_of
from ...plan.capacity.pod_resources import STAGED_WAIT_INIT
from ...plan.hardware.system_nodes import SYSTEM_GROUP
from ...plan.types import ContainerResourcesPlan, FleetPlan, VllmModelPlan
from ...plan.llm.weights import STAGED_MARKER
from ..iam import s3_location
from . import common as c

# The Job's program talks to the Hub and S3, so it is an edge module (engines/), which the compiler never
# imports: it ships the file's text in a ConfigMap.
SCRIPT = Path(__file__).resolve().parents[2] / "engines" / "stage_weights.py"
SCRIPT_DIR = "/opt/modelfleet"
HF_TOKEN_DIR = "/var/run/secrets/huggingface"
# Streams from the Hub into S3 multipart uploads (engines/stage_weights.py): TLS both ways and a sha256 at the
# Hub's rate take about a core, 8 upload threads hold 512 MiB of parts; no disk. It requests half a core and may
# burst to two: a created cluster's system nodes are m7i.large by default (2 vCPU, under 2 allocatable, CoreDNS
# and the controllers beside it), where a request of a whole core or more might never schedule.
STAGE_CONTAINER = ContainerResourcesPlan(name="stage", init=False, cpu_millis=500, memory_mib=1536,
                                         ephemeral_storage_gib=1)
STAGE_CPU_LIMIT_MILLIS = 2000
WAIT_PERIOD_S = 30
ATTEMPTS = 6  # the Job's backoffLimit + 1: each attempt resumes where the last one stopped
SKIPS = {
    "CKV_K8S_23": "the vLLM image runs as root (no non-root user in vllm/vllm-openai)",
    "CKV_K8S_40": "the vLLM image runs as root (no non-root user in vllm/vllm-openai)",
}


def stage_job_name(model: VllmModelPlan) -> str:
    revision = weights_of(model).revision
    assert revision is not None  # a staged checkpoint's commit
    return names.stage_job_name(model.name, revision)


def stage_account(model: VllmModelPlan) -> str:
    return names.stage_account(model.name)


def stage_script_name(model: VllmModelPlan) -> str:
    return names.stage_script_name(model.name)


def marker_uri(model: VllmModelPlan) -> str:
    return f"{weights_of(model).uri}/{STAGED_MARKER}"


def stage_budget_s(model: VllmModelPlan) -> int:
    """The Job's deadline (and Pulumi's wait for it): the checkpoint at the Hub's rate, twice, and 10 minutes
    for a node and the image; a copy cut short resumes file by file on the next attempt."""
    return 600 + 2 * math.ceil(weights_of(model).stage_gib / DOWNLOAD_GIB_PER_S)


def _placement() -> dict[str, Any]:
    """Off the fleet's serving node groups, which are sized for their serving pods: on a created cluster's
    system nodes, or on any node modelfleet did not create. Named without listing the groups, so that a
    change of node groups leaves the Job (whose pod template is immutable) alone."""
    terms = [{"matchExpressions": [{"key": c.NODE_GROUP_LABEL, "operator": "In", "values": [SYSTEM_GROUP]}]},
             {"matchExpressions": [{"key": c.NODE_GROUP_LABEL, "operator": "DoesNotExist"}]}]
    return {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}


def stage_objects(plan: FleetPlan, model: VllmModelPlan, patterns: tuple[str, ...], token_secret: str) -> list[dict[str, Any]]:
    """The service account, the program's ConfigMap, the Job's NetworkPolicy and the Job, in apply order."""
    weights = weights_of(model)
    assert weights.hub_id is not None and weights.revision is not None  # a staged checkpoint's
    bucket, prefix = s3_location(weights.uri)
    name, budget = stage_job_name(model), stage_budget_s(model)
    env = [{"name": "MODELFLEET_REPOSITORY", "value": weights.hub_id},
           {"name": "MODELFLEET_REVISION", "value": weights.revision},
           {"name": "MODELFLEET_BUCKET", "value": bucket}, {"name": "MODELFLEET_PREFIX", "value": prefix},
           {"name": "MODELFLEET_PATTERNS", "value": json.dumps(list(patterns))},
           {"name": "AWS_REGION", "value": plan.region}, {"name": "HF_HOME", "value": "/tmp/hf"},
           {"name": "HF_TOKEN_PATH", "value": f"{HF_TOKEN_DIR}/token"}, {"name": "PYTHONUNBUFFERED", "value": "1"}]
    container = {
        "name": "stage", "image": model.image, "imagePullPolicy": "IfNotPresent",
        "command": ["python3", f"{SCRIPT_DIR}/{SCRIPT.name}"], "env": env,
        "resources": c.resources(STAGE_CONTAINER, cpu_limit_millis=STAGE_CPU_LIMIT_MILLIS),
        "securityContext": c.container_security(read_only_root=True, non_root=False),
        "volumeMounts": [{"name": "program", "mountPath": SCRIPT_DIR, "readOnly": True},
                         {"name": "hf-token", "mountPath": HF_TOKEN_DIR, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}]}
    pod = {"serviceAccountName": stage_account(model), "automountServiceAccountToken": False,
           "securityContext": c.pod_security(None), "restartPolicy": "Never", **_placement(),
           "containers": [container],
           "volumes": [{"name": "program", "configMap": {"name": stage_script_name(model), "defaultMode": 0o444}},
                       {"name": "hf-token", "secret": {"secretName": token_secret, "defaultMode": 0o400}},
                       c.disk_volume("tmp", 1)]}
    annotations = c.checkov_skips(SKIPS | c.image_skips(model.image)) | {c.AWAIT_TIMEOUT: str(budget)}
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": c.metadata(name, plan, "weights", annotations),
           "spec": {"backoffLimit": ATTEMPTS - 1, "activeDeadlineSeconds": budget,
                    "template": {"metadata": {"labels": c.labels(name, "weights"),
                                              "annotations": c.checkov_skips(SKIPS | c.image_skips(model.image))},
                                 "spec": pod}}}
    program = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": c.metadata(stage_script_name(model), plan, "weights"),
               "data": {SCRIPT.name: SCRIPT.read_text()}}
    # Nothing connects to the Job's pod: its NetworkPolicy admits no ingress at all (egress to the Hub and S3).
    isolated = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": c.metadata(name, plan, "weights"),
                "spec": {"podSelector": {"matchLabels": c.selector(name)}, "policyTypes": ["Ingress"]}}
    return [c.service_account(stage_account(model), plan), program, isolated, job]


def wait_container(model: VllmModelPlan, env: list[dict[str, str]]) -> dict[str, Any]:
    """Holds a serving pod until the staging Job's marker is in S3 (Pulumi applies the workload only after the
    Job completed; this covers manifests applied by hand, and a prefix deleted since)."""
    bucket, key = s3_location(marker_uri(model))
    script = "\n".join([
        "import time, boto3",
        "from botocore.exceptions import ClientError",
        "s3 = boto3.client('s3')",
        "while True:",
        "    try:",
        f"        s3.head_object(Bucket={bucket!r}, Key={key!r})",
        "        break",
        "    except ClientError as error:",
        "        if error.response['Error']['Code'] not in ('404', 'NoSuchKey', 'NotFound'):",
        "            raise",
        f"    print({f'waiting for s3://{bucket}/{key} (the Job {stage_job_name(model)} stages the weights)'!r}, flush=True)",
        f"    time.sleep({WAIT_PERIOD_S})",
    ])
    return {"name": STAGED_WAIT_INIT.name, "image": model.image, "imagePullPolicy": "IfNotPresent",
            "command": ["python3", "-c", script], "env": env, "resources": c.resources(STAGED_WAIT_INIT),
            "securityContext": c.container_security(read_only_root=True, non_root=False)}
