"""IAM policy documents as data (pure): the cluster and node roles' trust, and each workload's read-only
pod role. Components turn them into roles; ``tests/hardening`` lints them with parliament.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..errors import CompileError, Issue
from ..plan.capacity.disk import weights_of
from ..plan.types import FleetPlan, TritonServerPlan, VllmModelPlan
from ..spec.values import s3_problem

# Exactly the three managed policies an EKS worker node needs, and nothing more.
NODE_POLICY_ARNS = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)
CLUSTER_POLICY_ARN = "arn:aws:iam::aws:policy/AmazonEKSClusterPolicy"


def _document(statements: list[dict[str, Any]]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": statements}, sort_keys=True)


def _service_trust(service: str, actions: list[str] | str) -> str:
    return _document([{"Effect": "Allow", "Principal": {"Service": service}, "Action": actions}])


def node_trust_policy() -> str:
    return _service_trust("ec2.amazonaws.com", "sts:AssumeRole")


def cluster_trust_policy() -> str:
    return _service_trust("eks.amazonaws.com", ["sts:AssumeRole", "sts:TagSession"])


def pod_identity_trust_policy() -> str:
    """EKS Pod Identity: the agent assumes the role (and tags the session) for the associated service account."""
    return _service_trust("pods.eks.amazonaws.com", ["sts:AssumeRole", "sts:TagSession"])


def s3_location(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix/`` -> ``("bucket", "some/prefix")``. A URI whose grant would not be exactly its
    prefix (a wildcard, a policy variable, a bare bucket, an empty or dot segment: spec/values.s3_problem) is
    refused here too, whatever reached this point: the spec refuses it with its line first."""
    if problem := s3_problem(uri):
        raise CompileError([Issue("", 0, 0, "", f"{uri!r} cannot be granted as an IAM prefix: {problem}",
                                  "a compiler bug: the spec should have refused it; report it")])
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key.removesuffix("/")


def read_only_policy(locations: Iterable[tuple[str, str]]) -> str:
    """GetObject under each (bucket, prefix) and ListBucket restricted to those prefixes, nothing else.

    The bare prefix is listable as well as ``prefix/*``: some clients list ``hf/model`` without the slash.
    """
    prefixes = sorted(set(locations))
    objects = sorted(f"arn:aws:s3:::{bucket}/{key}/*" for bucket, key in prefixes)
    statements: list[dict[str, Any]] = [{"Sid": "ReadObjects", "Effect": "Allow", "Action": "s3:GetObject",
                                         "Resource": objects}]
    for index, bucket in enumerate(sorted({b for b, _ in prefixes})):
        keys = sorted(p for b, key in prefixes if b == bucket for p in (key, f"{key}/*"))
        statements.append({"Sid": f"ListPrefixes{index}", "Effect": "Allow", "Action": "s3:ListBucket",
                           "Resource": f"arn:aws:s3:::{bucket}", "Condition": {"StringLike": {"s3:prefix": keys}}})
    return _document(statements)


def model_read_policy(repository_bucket: str, repository_prefix: str, artifacts: tuple[str, ...]) -> str:
    """Read-only: a Triton server's own config prefix and its models' artifact prefixes."""
    repository = s3_location(f"s3://{repository_bucket}/{repository_prefix}")
    return read_only_policy([repository, *map(s3_location, artifacts)])


def s3_artifacts(plan: FleetPlan, names: Iterable[str]) -> tuple[str, ...]:
    """The artifacts of these models that live in S3 (Hugging Face ids are read with the HF token)."""
    return tuple(sorted({a for n in names if (a := plan.model(n).artifact).startswith("s3://")}))


def triton_read_policy(plan: FleetPlan, server: TritonServerPlan, repository_bucket: str, prefix: str) -> str:
    """What a Triton server's pods may read: its config prefix and the artifacts of the models it serves."""
    return model_read_policy(repository_bucket, prefix, s3_artifacts(plan, server.models))


def vllm_read_policy(model: VllmModelPlan) -> str | None:
    """What a vLLM model's pods may read: the S3 prefix runai_streamer streams (its s3:// artifact, or its
    staged Hub checkpoint: plan/llm/weights.py); None when every pod downloads from the Hub."""
    weights = weights_of(model)
    return None if weights.source == "hub" else read_only_policy([s3_location(weights.uri)])


def stage_write_policy(model: VllmModelPlan) -> str:
    """What a staged checkpoint's Job may do: write, read back, list and delete (a file that failed its digest
    check) under that one revision's prefix, and nothing else."""
    weights = weights_of(model)
    assert weights.source == "staged"
    bucket, key = s3_location(weights.uri)
    return _document([
        {"Sid": "StageObjects", "Effect": "Allow",
         "Action": ["s3:AbortMultipartUpload", "s3:DeleteObject", "s3:GetObject", "s3:ListMultipartUploadParts",
                    "s3:PutObject"],
         "Resource": f"arn:aws:s3:::{bucket}/{key}/*"},
        {"Sid": "ListPrefix", "Effect": "Allow", "Action": "s3:ListBucket", "Resource": f"arn:aws:s3:::{bucket}",
         "Condition": {"StringLike": {"s3:prefix": [key, f"{key}/*"]}}}])


def cluster_autoscaler_policy(cluster_name: str, region: str) -> str:
    """The cluster autoscaler's permissions (as its AWS documentation lists them), scoped: it may resize and
    trim only the Auto Scaling groups EKS created for this cluster's managed node groups (named ``eks-...``,
    tagged ``k8s.io/cluster-autoscaler/<cluster>: owned``) and describe only this cluster's node groups; the
    Describe calls that take no resource stay on ``*``."""
    groups = f"arn:aws:autoscaling:{region}:*:autoScalingGroup:*:autoScalingGroupName/eks-*"
    return _document([
        {"Sid": "ResizeThisClustersGroups", "Effect": "Allow",
         "Action": ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"],
         "Resource": groups,
         "Condition": {"StringEquals": {f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"}}},
        {"Sid": "DescribeThisClustersNodeGroups", "Effect": "Allow", "Action": "eks:DescribeNodegroup",
         "Resource": f"arn:aws:eks:{region}:*:nodegroup/{cluster_name}/*/*"},
        {"Sid": "DescribeGroupsAndInstanceTypes", "Effect": "Allow",
         "Action": ["autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeAutoScalingInstances",
                    "autoscaling:DescribeLaunchConfigurations", "autoscaling:DescribeScalingActivities",
                    "autoscaling:DescribeTags", "ec2:DescribeImages", "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplateVersions", "ec2:GetInstanceTypesFromInstanceRequirements"],
         "Resource": "*"}])
