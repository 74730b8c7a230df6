"""A workload's AWS identity: a role only EKS Pod Identity can assume, bound to the workload's service account."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws

from modelfleet.deploy.types import PodIdentityDeploy


def pod_role(spec: PodIdentityDeploy, cluster_name: pulumi.Input[str],
             parent: pulumi.Resource) -> aws.eks.PodIdentityAssociation:
    """Role ``<name>-pod`` with its one inline policy, associated with the service account."""
    def named(suffix: str, **opts) -> pulumi.ResourceOptions:  # a renamed workload's resources carry over
        return pulumi.ResourceOptions(parent=parent, aliases=[pulumi.Alias(name=f"{a}-{suffix}") for a in spec.aliases],
                                      **opts)

    role = aws.iam.Role(f"{spec.name}-pod", assume_role_policy=spec.trust_policy, opts=named("pod"))
    grant = aws.iam.RolePolicy(f"{spec.name}-{spec.policy_name}", role=role.id, policy=spec.policy,
                               opts=named(spec.policy_name))
    return aws.eks.PodIdentityAssociation(
        f"{spec.name}-identity", cluster_name=cluster_name, namespace=spec.namespace,
        service_account=spec.service_account, role_arn=role.arn, opts=named("identity", depends_on=[grant]))
