"""Access to the EKS cluster: an existing one by name (default), or one this stack creates."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from modelfleet.environment import EnvironmentSpec
from modelfleet.iam import CLUSTER_POLICY_ARN, cluster_trust_policy


def kubeconfig(name: pulumi.Input[str], endpoint: pulumi.Input[str], ca_data: pulumi.Input[str], region: str) -> pulumi.Output[str]:
    """A kubeconfig that authenticates with `aws eks get-token` (no long-lived credentials in state)."""
    def render(args: list[str]) -> str:
        cluster, server, ca = args
        user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                         "args": ["eks", "get-token", "--cluster-name", cluster, "--region", region]}}
        return json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": cluster,
                           "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": ca}}],
                           "users": [{"name": cluster, "user": user}],
                           "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": cluster}}]})

    return pulumi.Output.all(name, endpoint, ca_data).apply(render)


class ClusterAccess(pulumi.ComponentResource):
    """``name``, ``subnet_ids``, a kubernetes ``provider`` for the workloads, and ``ready``: what workloads
    wait for (a created cluster's Pod Identity agent, without which pods get no AWS credentials)."""

    def __init__(self, name: str, env: EnvironmentSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:ClusterAccess", name, None, opts)
        self.cluster_name = env.cluster.name or f"modelfleet-{env.name}"
        self.ready: list[pulumi.Resource] = []
        endpoint, ca = self._create(name, env) if env.cluster.create else self._join(env)
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=kubeconfig(self.name, endpoint, ca, env.region),
                                     opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"name": self.name})

    def _join(self, env: EnvironmentSpec) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        found = aws.eks.get_cluster_output(name=self.cluster_name, opts=pulumi.InvokeOptions(parent=self))
        self.name: pulumi.Output[str] = found.name
        self.subnet_ids: pulumi.Input[list[str]] = list(env.cluster.subnet_ids) or found.vpc_config.subnet_ids
        return found.endpoint, found.certificate_authorities[0].data

    def _create(self, name: str, env: EnvironmentSpec) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        child = pulumi.ResourceOptions(parent=self)
        role = aws.iam.Role(f"{name}-role", assume_role_policy=cluster_trust_policy(), opts=child)
        attachment = aws.iam.RolePolicyAttachment(f"{name}-cluster-policy", role=role.name,
                                                  policy_arn=CLUSTER_POLICY_ARN, opts=child)
        cluster = aws.eks.Cluster(
            f"{name}-eks", name=self.cluster_name, role_arn=role.arn, version=env.kubernetes_version,
            vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=list(env.cluster.subnet_ids),
                                                    endpoint_private_access=True, endpoint_public_access=True),
            # API access entries only; whoever runs `pulumi up` administers the cluster it created.
            access_config=aws.eks.ClusterAccessConfigArgs(authentication_mode="API",
                                                          bootstrap_cluster_creator_admin_permissions=True),
            opts=pulumi.ResourceOptions(parent=self, protect=env.protect, depends_on=[attachment]))
        self.ready = [aws.eks.Addon(f"{name}-pod-identity-agent", cluster_name=cluster.name,
                                    addon_name="eks-pod-identity-agent", opts=child)]
        self.name = cluster.name
        self.subnet_ids = list(env.cluster.subnet_ids)
        return cluster.endpoint, cluster.certificate_authority.data
