"""The cluster this stack deploys into: an existing one by name (default), or one it creates.

A created cluster's API endpoint is private, or public only to the CIDRs the stack lists
(``cluster.publicAccessCidrs``, required: checks.py). Private-only would force every `pulumi up` to run
inside the VPC; open to 0.0.0.0/0 (EKS's default) exposes the API server to the internet. An explicit list
of the deployers' egress CIDRs is the choice that works for both CI and security.
"""

from __future__ import annotations

import json

from ..spec.environment import EnvironmentSpec
from ..render.iam import CLUSTER_POLICY_ARN, NODE_POLICY_ARNS, cluster_trust_policy, node_trust_policy
from .types import ClusterDeploy, EksAddonDeploy, RoleDeploy

# The Pod Identity agent gives pods their roles' credentials; the VPC CNI enforces the NetworkPolicies
# (off by default in the add-on).
CREATED_CLUSTER_ADDONS = (
    EksAddonDeploy(name="pod-identity-agent", addon_name="eks-pod-identity-agent"),
    EksAddonDeploy(name="vpc-cni", addon_name="vpc-cni", configuration_values=json.dumps({"enableNetworkPolicy": "true"})),
)


def cluster_name(env: EnvironmentSpec) -> str:
    return env.cluster.name or f"modelfleet-{env.name}"


def cluster_deploy(env: EnvironmentSpec) -> ClusterDeploy:
    create, cidrs = env.cluster.create, tuple(env.cluster.public_access_cidrs or ())
    role = RoleDeploy(name="role", trust_policy=cluster_trust_policy(), policy_arns=(CLUSTER_POLICY_ARN,))
    return ClusterDeploy(name=cluster_name(env), create=create, region=env.region,
                         kubernetes_version=env.kubernetes_version, subnet_ids=env.cluster.subnet_ids,
                         endpoint_public_access=bool(cidrs), public_access_cidrs=cidrs, protect=env.protect,
                         role=role if create else None, addons=CREATED_CLUSTER_ADDONS if create else ())


def node_role() -> RoleDeploy:
    """The GPU (and system) nodes' role: exactly the three EKS worker policies."""
    return RoleDeploy(name="role", trust_policy=node_trust_policy(), policy_arns=NODE_POLICY_ARNS)
