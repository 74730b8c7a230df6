"""IAM policy documents as data (pure): the node role and each Triton server's read-only pod role.

Components turn them into roles; ``tests`` lint them with parliament.
"""

from __future__ import annotations

import json
from typing import Any

# Exactly the three managed policies an EKS worker node needs, and nothing more.
NODE_POLICY_ARNS = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)


def _document(statements: list[dict[str, Any]]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def node_trust_policy() -> str:
    return _document([{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}])


def cluster_trust_policy() -> str:
    return _document([{"Effect": "Allow", "Principal": {"Service": "eks.amazonaws.com"},
                       "Action": ["sts:AssumeRole", "sts:TagSession"]}])


def pod_identity_trust_policy() -> str:
    """EKS Pod Identity: the agent assumes the role (and tags the session) for the bound service account."""
    return _document([{"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
                       "Action": ["sts:AssumeRole", "sts:TagSession"]}])


def irsa_trust_policy(oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account: str) -> str:
    """IRSA: only this namespace's service account, through the cluster's OIDC provider."""
    issuer = oidc_issuer.removeprefix("https://")
    return _document([{"Effect": "Allow", "Principal": {"Federated": oidc_provider_arn},
                       "Action": "sts:AssumeRoleWithWebIdentity",
                       "Condition": {"StringEquals": {f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                                                      f"{issuer}:aud": "sts.amazonaws.com"}}}])


def _split(uri: str) -> tuple[str, str]:
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key.rstrip("/")


def model_read_policy(repository_bucket: str, repository_prefix: str, artifacts: tuple[str, ...]) -> str:
    """Read-only: the server's own config prefix and its models' artifact prefixes, nothing else."""
    prefixes = sorted({(repository_bucket, repository_prefix), *(_split(a) for a in artifacts)})
    objects = sorted(f"arn:aws:s3:::{bucket}/{key}/*" for bucket, key in prefixes)
    statements: list[dict[str, Any]] = [{"Sid": "ReadObjects", "Effect": "Allow", "Action": "s3:GetObject",
                                         "Resource": objects}]
    for index, bucket in enumerate(sorted({b for b, _ in prefixes})):
        keys = sorted(f"{key}/*" for b, key in prefixes if b == bucket)
        statements.append({"Sid": f"ListPrefixes{index}", "Effect": "Allow", "Action": "s3:ListBucket",
                           "Resource": f"arn:aws:s3:::{bucket}",
                           "Condition": {"StringLike": {"s3:prefix": keys}}})
    return _document(statements)
