"""The bucket holding every Triton server's config.pbtxt objects (model artifacts stay where they live)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from modelfleet.deploy.types import BucketDeploy

# The first version of the program created these at the stack's root; the aliases keep those resources
# (a protected bucket in prod) instead of replacing them now that they belong to this component.
AT_ROOT = [pulumi.Alias(parent=pulumi.ROOT_STACK_RESOURCE)]


class ModelRepository(pulumi.ComponentResource):
    """A private, versioned bucket (a config change can be rolled back to the previous object)."""

    def __init__(self, spec: BucketDeploy, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:ModelRepository", spec.name, None, opts)
        name = spec.name
        self.bucket = aws.s3.Bucket(name, bucket=spec.bucket,
                                    opts=pulumi.ResourceOptions(parent=self, protect=spec.protect, aliases=AT_ROOT))
        self.private = aws.s3.BucketPublicAccessBlock(
            f"{name}-private", bucket=self.bucket.id, block_public_acls=True, block_public_policy=True,
            ignore_public_acls=True, restrict_public_buckets=True,
            opts=pulumi.ResourceOptions(parent=self, aliases=AT_ROOT))
        self.versioning = aws.s3.BucketVersioning(
            f"{name}-versioning", bucket=self.bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(status="Enabled"),
            opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"bucket": self.bucket.bucket})
