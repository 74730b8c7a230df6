"""Where each vLLM model's checkpoint comes from at a cold start, and what each pod and each GPU's process reads.

A pod's emptyDir dies with the pod, and a LeaderWorkerSet recreates its whole group when one pod restarts: a
Hub checkpoint downloaded into emptyDirs is downloaded again after every recreation (the 405B's 756 GiB, at the
Hub's rate). So a pinned Hub checkpoint is **staged**: a Job (render/k8s/staging.py) copies it once per revision
into the stack's bucket, under ``weights/<repository>/<commit>/``, verifying every file against the Hub's
digests and writing ``modelfleet-staged.json`` last; the pods then stream it from there with runai_streamer,
exactly as an ``s3://`` artifact is streamed. The prefix is named by the commit, so it never changes under a
running pod, and a rollback finds its weights where they were.

Why S3 and not the node's NVMe: a hostPath there is refused by the namespace's baseline Pod Security, local
PersistentVolumes need a provisioner and keep the copy only while the group lands on the same nodes, and a
fresh node (an update, a scale-out, a replaced instance) would still read the Hub. S3 outlives nodes.

Reads. runai_streamer streams safetensors to the GPUs. Alone, every tensor-parallel rank reads the whole
checkpoint (vLLM shards after reading): a pod of 8 GPUs reads it 8 times. Its distributed mode (vLLM's
``--model-loader-extra-config '{"distributed": true}'``, runai-model-streamer's DistributedStreamer) splits the
files' chunks between all of the replica's ranks and broadcasts them over NCCL, so a pod reads its share,
``checkpoint / nodes``. Every multi-GPU replica streams distributed; the startup budget counts ``pod_read_gib``.

A Hub checkpoint that is not pinned (or a stack with ``deploy.stageHubWeights: false``) is downloaded by every
pod into its emptyDir as before, and the plan says so: an S3 copy of a moving branch would go stale.
"""

from __future__ import annotations

from ...spec.environment import DeploySettings
from ..types import WeightsPlan

WEIGHTS_PREFIX = "weights"
STAGED_MARKER = "modelfleet-staged.json"  # written last by the staging Job: the prefix is complete


def repository_bucket(environment: str, deploy: DeploySettings) -> str:
    """The stack's bucket: Triton's configs and the staged checkpoints."""
    return deploy.model_repository_bucket or f"modelfleet-{environment}-model-repository"


def staged_prefix(hub_id: str, revision: str) -> str:
    """The key prefix of a staged checkpoint (no trailing slash): named by its commit, so never rewritten."""
    return f"{WEIGHTS_PREFIX}/{hub_id}/{revision}"


def weights_plan(*, artifact: str, revision: str | None, checkpoint_gib: float, tp: int, pp: int,
                 environment: str, deploy: DeploySettings) -> WeightsPlan:
    """``artifact``: the pinned artifact (an s3:// prefix with its revision, or the Hub id)."""
    ranks = tp * pp
    if artifact.startswith("s3://"):
        return _streamed("s3", artifact, checkpoint_gib, tp, pp,
                         f"an S3 prefix, streamed by runai_streamer{_split(ranks)}")
    if revision is None or not deploy.stage_hub_weights:
        why = ("not pinned: a copy of a moving branch would go stale, so every pod downloads the Hub's main branch "
               "into its emptyDir, again whenever the pod or its group is recreated (pin revision: <commit> to "
               "stage it once)" if revision is None else
               "deploy.stageHubWeights is false: every pod downloads the Hub checkpoint into its emptyDir, again "
               "whenever the pod or its group is recreated")
        return WeightsPlan(source="hub", uri=artifact, pod_read_gib=round(checkpoint_gib, 3),
                           rank_read_gib=round(checkpoint_gib / pp, 3), reason=why)
    uri = f"s3://{repository_bucket(environment, deploy)}/{staged_prefix(artifact, revision)}"
    staged = _streamed("staged", uri, checkpoint_gib, tp, pp,
                       f"a pinned Hub checkpoint, copied once to {uri} by a Job (every file checked against the "
                       f"Hub's digests, {STAGED_MARKER} last), then streamed by runai_streamer{_split(ranks)}; a "
                       "recreated pod or group reads S3 again, never the Hub")
    return staged.model_copy(update={"hub_id": artifact, "revision": revision, "stage_gib": round(checkpoint_gib, 3)})


def _split(ranks: int) -> str:
    return (f", its {ranks} ranks splitting the reads (distributed streaming)" if ranks > 1 else "")


def _streamed(source: str, uri: str, checkpoint_gib: float, tp: int, pp: int, reason: str) -> WeightsPlan:
    """Distributed streaming on every multi-GPU replica: each rank reads its share, each pod its ranks'."""
    ranks = tp * pp
    return WeightsPlan(source=source, uri=uri, distributed=ranks > 1, pod_read_gib=round(checkpoint_gib / pp, 3),
                       rank_read_gib=round(checkpoint_gib / ranks, 3), reason=reason)
