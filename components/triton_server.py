"""One Triton server: its configs in S3, a pod role that reads only what it serves, its manifests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_aws as aws

from modelfleet.iam import triton_read_policy
from modelfleet.k8s import model_repository_prefix
from modelfleet.plan import FleetPlan, TritonServerPlan

from .identity import pod_role
from .kubernetes import apply_objects


class TritonServer(pulumi.ComponentResource):
    """``repository``: the server's S3 objects (key -> content) exactly as ``modelfleet render`` wrote them."""

    def __init__(self, plan: FleetPlan, server: TritonServerPlan, repository: Mapping[str, bytes],
                 manifests: Sequence[dict[str, Any]], bucket: aws.s3.Bucket, cluster_name: pulumi.Input[str],
                 provider: pulumi.ProviderResource, after: Sequence[pulumi.Resource] = (),
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:TritonServer", server.name, None, opts)
        prefix = model_repository_prefix(server)
        objects = [aws.s3.BucketObjectv2(key.removeprefix("triton/").replace("/", "-"), bucket=bucket.id, key=key,
                                         content=content.decode(), content_type="text/plain",
                                         opts=pulumi.ResourceOptions(parent=self))
                   for key, content in sorted(repository.items())]
        policy = bucket.bucket.apply(lambda name: triton_read_policy(plan, server, name, prefix))
        identity = pod_role(server.name, policy, cluster_name, plan.namespace, self)
        apply_objects(manifests, self, provider, depends_on=[*after, *objects, identity])
        self.register_outputs({})
