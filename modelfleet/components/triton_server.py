"""One Triton server: its configs in S3, a pod role that reads only what it serves, its manifests."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from modelfleet.deploy.types import S3ObjectDeploy, TritonDeploy, credentials_key

from .identity import pod_role
from .kubernetes import apply_objects
from .registry import Registry


class TritonServer(pulumi.ComponentResource):
    def __init__(self, spec: TritonDeploy, bucket: aws.s3.Bucket, cluster_name: pulumi.Input[str],
                 provider: pulumi.ProviderResource, registry: Registry, opts: pulumi.ResourceOptions | None = None) -> None:
        renamed = pulumi.ResourceOptions(aliases=[pulumi.Alias(name=a) for a in spec.aliases])
        super().__init__("modelfleet:index:TritonServer", spec.name, None, pulumi.ResourceOptions.merge(opts, renamed))
        objects = [aws.s3.BucketObjectv2(o.name, bucket=bucket.id, key=o.key, **_body(o),
                                         opts=pulumi.ResourceOptions(parent=self, retain_on_delete=o.retain_on_delete))
                   for o in spec.objects]
        registry.add(credentials_key(spec.name), pod_role(spec.identity, cluster_name, self), *objects)
        apply_objects(spec.manifests, self, provider, registry)
        self.register_outputs({})


def _body(obj: S3ObjectDeploy) -> dict[str, str]:
    """A config as text; a binary file (a warmup sample) as base64, which S3 stores as its bytes."""
    if obj.encoding == "base64":
        return {"content_base64": obj.content, "content_type": "application/octet-stream"}
    return {"content": obj.content, "content_type": "text/plain"}
