"""Access to the EKS cluster: an existing one by name (default), or one this stack creates."""

from __future__ import annotations

import json

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from modelfleet.environment import EnvironmentSpec
from modelfleet.iam import cluster_trust_policy


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
    """``name``, ``subnet_ids`` and a kubernetes ``provider`` for the workloads."""

    def __init__(self, name: str, env: EnvironmentSpec, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:ClusterAccess", name, None, opts)
        settings = env.cluster
        cluster_name = settings.name or f"modelfleet-{env.name}"
        if settings.create:
            role = aws.iam.Role(f"{name}-role", assume_role_policy=cluster_trust_policy(),
                                opts=pulumi.ResourceOptions(parent=self))
            aws.iam.RolePolicyAttachment(f"{name}-cluster-policy", role=role.name,
                                         policy_arn="arn:aws:iam::aws:policy/AmazonEKSClusterPolicy",
                                         opts=pulumi.ResourceOptions(parent=self))
            cluster = aws.eks.Cluster(
                f"{name}-eks", name=cluster_name, role_arn=role.arn, version=env.kubernetes_version,
                vpc_config=aws.eks.ClusterVpcConfigArgs(subnet_ids=list(settings.subnet_ids),
                                                        endpoint_private_access=True),
                access_config=aws.eks.ClusterAccessConfigArgs(authentication_mode="API"),
                opts=pulumi.ResourceOptions(parent=self, protect=env.deploy.protect))
            self.name: pulumi.Output[str] = cluster.name
            endpoint, ca = cluster.endpoint, cluster.certificate_authority.data
            self.subnet_ids: pulumi.Input[list[str]] = list(settings.subnet_ids)
        else:
            found = aws.eks.get_cluster_output(name=cluster_name)
            self.name = found.name
            endpoint, ca = found.endpoint, found.certificate_authorities[0].data
            self.subnet_ids = list(settings.subnet_ids) or found.vpc_config.subnet_ids
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=kubeconfig(self.name, endpoint, ca, env.region),
                                     opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"name": self.name})
