"""Access to the EKS cluster: an existing one by name, or one this stack creates (``ClusterDeploy``)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from modelfleet.deploy.types import ClusterDeploy


class ClusterAccess(pulumi.ComponentResource):
    """``name``, ``subnet_ids`` (for node groups that list none), a kubernetes ``provider``, and ``ready``: a
    created cluster's add-ons (without the Pod Identity agent pods get no AWS credentials)."""

    def __init__(self, name: str, spec: ClusterDeploy, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:ClusterAccess", name, None, opts)
        self.ready: list[pulumi.Resource] = []
        endpoint, ca = self._create(name, spec) if spec.create else self._join(spec)
        kubeconfig = pulumi.Output.all(self.name, endpoint, ca).apply(lambda args: spec.kubeconfig(*args))
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=kubeconfig, opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"name": self.name})

    def _join(self, spec: ClusterDeploy) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        found = aws.eks.get_cluster_output(name=spec.name, opts=pulumi.InvokeOptions(parent=self))
        self.name: pulumi.Output[str] = found.name
        self.subnet_ids: pulumi.Input[list[str]] = list(spec.subnet_ids) or found.vpc_config.subnet_ids
        return found.endpoint, found.certificate_authorities[0].data

    def _create(self, name: str, spec: ClusterDeploy) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        assert spec.role is not None  # a created cluster always has its role
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(f"{name}-{spec.role.name}", assume_role_policy=spec.role.trust_policy, opts=child)
        attachments = [aws.iam.RolePolicyAttachment(f"{name}-cluster-policy", role=role.name, policy_arn=arn, opts=child)
                       for arn in spec.role.policy_arns]
        cluster = aws.eks.Cluster(
            f"{name}-eks", name=spec.name, role_arn=role.arn, version=spec.kubernetes_version,
            vpc_config=aws.eks.ClusterVpcConfigArgs(
                subnet_ids=list(spec.subnet_ids), endpoint_private_access=True,
                endpoint_public_access=spec.endpoint_public_access,
                public_access_cidrs=list(spec.public_access_cidrs) if spec.endpoint_public_access else None),
            # API access entries only; whoever runs `pulumi up` administers the cluster it created.
            access_config=aws.eks.ClusterAccessConfigArgs(authentication_mode="API",
                                                          bootstrap_cluster_creator_admin_permissions=True),
            opts=pulumi.ResourceOptions(parent=self, protect=spec.protect, depends_on=attachments))
        self.ready = [aws.eks.Addon(f"{name}-{addon.name}", cluster_name=cluster.name, addon_name=addon.addon_name,
                                    configuration_values=addon.configuration_values,
                                    resolve_conflicts_on_create="OVERWRITE", opts=child)
                      for addon in spec.addons]
        self.name = cluster.name
        self.subnet_ids = list(spec.subnet_ids)
        return cluster.endpoint, cluster.certificate_authority.data
