"""One Triton server: its configs in S3, a pod role that reads only what it serves, its manifests."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_aws as aws

from modelfleet.iam import model_read_policy, pod_identity_trust_policy
from modelfleet.plan import FleetPlan, TritonModelPlan, TritonServerPlan

from .kubernetes import apply_objects


class TritonServer(pulumi.ComponentResource):
    def __init__(self, server: TritonServerPlan, plan: FleetPlan, files: dict[str, bytes], bucket: aws.s3.Bucket,
                 prefix: str, manifests: list[dict[str, Any]], cluster_name: pulumi.Input[str],
                 provider: pulumi.ProviderResource, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:TritonServer", server.name, None, opts)
        objects = []
        for relative, content in sorted(files.items()):
            if relative.startswith(f"triton/{server.name}/") and not relative.endswith("server.json"):
                key = prefix + relative.removeprefix(f"triton/{server.name}")
                objects.append(aws.s3.BucketObjectv2(
                    f"{server.name}{relative.removeprefix(f'triton/{server.name}').replace('/', '-')}",
                    bucket=bucket.id, key=key, content=content.decode(), content_type="text/plain",
                    opts=pulumi.ResourceOptions(parent=self)))
        artifacts = tuple(m.artifact for n in server.models if isinstance(m := plan.model(n), TritonModelPlan))
        role = aws.iam.Role(f"{server.name}-pod", assume_role_policy=pod_identity_trust_policy(),
                            opts=pulumi.ResourceOptions(parent=self))
        aws.iam.RolePolicy(f"{server.name}-read", role=role.id,
                           policy=bucket.bucket.apply(lambda b: model_read_policy(b, prefix, artifacts)),
                           opts=pulumi.ResourceOptions(parent=self))
        identity = aws.eks.PodIdentityAssociation(
            f"{server.name}-identity", cluster_name=cluster_name, namespace=plan.namespace,
            service_account=server.name, role_arn=role.arn, opts=pulumi.ResourceOptions(parent=self))
        apply_objects(manifests, self, provider, depends_on=[*objects, identity])
        self.endpoint = f"{server.name}.{plan.namespace}.svc.cluster.local:8000"
        self.register_outputs({"endpoint": self.endpoint})
