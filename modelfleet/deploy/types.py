"""What ``pulumi up`` creates, decided (``*Deploy``): frozen data the Pulumi components only turn into resources.

The components (``components/``) import this module, ``modelfleet.plan.types`` and pulumi, nothing else: every
choice (names, taints, labels, disks, scaling, IAM documents, what waits for what) is made by the pure
``modelfleet.deploy`` package and can be tested without mocks.

Dependencies are named by keys (``Key``): an applied object ``waits_for`` keys, and the program resolves each
key to the resources registered under it. The pure side only ever names keys that exist in the same plan.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..plan.teams import TEAM_LABEL  # noqa: F401  (components tag with it: they import only these types)
from ..spec.team import SHARED


class DeployModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- dependency keys: what a resource waits for ------------------------------------------------------------


def object_key(logical_name: str) -> str:
    """A Kubernetes object applied by this program, by its logical name."""
    return f"object:{logical_name}"


def node_group_key(name: str) -> str:
    return f"node-group:{name}"


def release_key(name: str) -> str:
    return f"release:{name}"


REPOSITORY_KEY = "bucket:model-repository"  # the stack's bucket (Triton configs, staged checkpoints)


def credentials_key(workload: str) -> str:
    """A workload's credentials: its pod identity association, HF token Secret or S3 objects."""
    return f"credentials:{workload}"


# Component types whose URNs the deploy plan names (`pulumi state unprotect` commands).
GPU_NODE_GROUP_TYPE, SYSTEM_NODE_GROUP_TYPE = "modelfleet:index:GpuNodeGroup", "modelfleet:index:SystemNodeGroup"
CPU_NODE_GROUP_TYPE = "modelfleet:index:CpuNodeGroup"  # KIND_CPU Triton servers' nodes: no GPU, no taint

CLUSTER_READY = "cluster-ready"  # a created cluster's add-ons (Pod Identity agent, VPC CNI network policy)
SYSTEM_NODES = "system-nodes"  # a created cluster's untainted node group, where controllers run


# --- AWS -------------------------------------------------------------------------------------------------------


class LiveNodeGroup(DeployModel):
    """A node group as EKS reports it before this deploy (read by the program at preview and up time)."""

    name: str  # the EKS name: the planned prefix and the provider's unique suffix
    min_size: int
    desired_size: int
    max_size: int
    ami_type: str
    capacity_type: str
    instance_types: tuple[str, ...]
    subnet_ids: tuple[str, ...]
    tags: dict[str, str]


class LiveSubnet(DeployModel):
    """A subnet the node groups may use, and its availability zone (read by the program: components/live.py)."""

    id: str
    zone: str


class LiveCluster(DeployModel):
    """What the program reads of the cluster before deploying: its Kubernetes version (a joined cluster's is
    not the stack's to choose) and its node groups' subnets with their zones."""

    kubernetes_version: str | None  # None: the cluster does not exist yet (this stack creates it)
    subnets: tuple[LiveSubnet, ...] = ()


class Taint(DeployModel):
    key: str
    value: str
    effect: Literal["NO_SCHEDULE", "NO_EXECUTE", "PREFER_NO_SCHEDULE"]  # the EKS API's spelling


class LaunchTemplateDeploy(DeployModel):
    """IMDSv2 only with one hop (pods cannot reach the node role), and the volume pods write to."""

    name: str
    device_name: str
    volume_gib: int
    throughput_mibps: int  # gp3: 125 included, up to 1000
    iops: int  # gp3: 3000 included; at least 4 per MiB/s of throughput
    tags: dict[str, str]
    # What the node's bootstrap does before the kubelet starts (instance store RAID0), as the AMI reads it:
    # a MIME multipart with a nodeadm NodeConfig (AL2023) or Bottlerocket TOML settings; None: nothing.
    user_data: str | None = None


class ScalingDeploy(DeployModel):
    min_size: int
    desired_size: int
    max_size: int
    # The cluster autoscaler owns the desired size once the group exists: Pulumi leaves it alone...
    ignore_desired: bool
    # ...except when the planned bounds move past the live desired size (or the group is new): why, for the preview.
    note: str = ""


class NodeGroupDeploy(DeployModel):
    name: str  # the logical name (and the EKS name's prefix, before the provider's suffix)
    name_prefix: str
    instance_type: str
    capacity_type: Literal["ON_DEMAND", "SPOT"]
    ami_type: str
    labels: dict[str, str]
    tags: dict[str, str]
    taints: tuple[Taint, ...]
    scaling: ScalingDeploy
    launch_template: LaunchTemplateDeploy
    subnet_ids: tuple[str, ...]  # empty: the cluster's own subnets (looked up)
    protect: bool
    # Its modelfleet.io/team tag, on it, its launch template and its instances (plan/teams.py): the team of
    # the models it hosts, or "shared".
    team: str = SHARED
    zone: str | None = None  # a zonal group's one zone (its subnets are that zone's)
    plan_group: str | None = None  # a zonal group's node group in the plan (what workloads wait for)
    # EKS's update of the group's nodes (a new launch template or AMI): how many nodes at a time, and whether
    # to go on when a PodDisruptionBudget still blocks an eviction after EKS's 15 minutes (node_groups.py).
    update_max_unavailable: int = 1
    force_update: bool = False
    after: tuple[str, ...] = ()  # node groups (logical names) whose updates must finish first
    device: Literal["gpu", "cpu"] = "gpu"  # cpu: a CPU group (its AMI without the NVIDIA driver, no GPU taint)


class RoleDeploy(DeployModel):
    name: str
    trust_policy: str
    policy_arns: tuple[str, ...]


class PodIdentityDeploy(DeployModel):
    """A role only EKS Pod Identity can assume, with one inline policy, bound to a service account."""

    name: str  # resources are <name>-pod, <name>-<policy_name>, <name>-identity
    namespace: str
    service_account: str
    policy: str
    trust_policy: str
    policy_name: str = "read"  # what the inline policy allows: workloads read; a staging Job writes its prefix
    aliases: tuple[str, ...] = ()  # earlier names (a renamed Triton server): its resources carry over


class EksAddonDeploy(DeployModel):
    name: str
    addon_name: str
    configuration_values: str | None = None


class ClusterDeploy(DeployModel):
    name: str
    create: bool
    region: str
    kubernetes_version: str
    subnet_ids: tuple[str, ...]
    endpoint_public_access: bool
    public_access_cidrs: tuple[str, ...]
    protect: bool
    role: RoleDeploy | None  # the created cluster's role
    addons: tuple[EksAddonDeploy, ...]

    def kubeconfig(self, name: str, endpoint: str, ca_data: str) -> str:
        """A kubeconfig that authenticates with ``aws eks get-token`` (no long-lived credentials in state)."""
        user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
                         "args": ["eks", "get-token", "--cluster-name", name, "--region", self.region]}}
        return json.dumps({"apiVersion": "v1", "kind": "Config", "current-context": name,
                           "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
                           "users": [{"name": name, "user": user}],
                           "contexts": [{"name": name, "context": {"cluster": name, "user": name}}]})


class BucketDeploy(DeployModel):
    name: str
    bucket: str
    protect: bool


class S3ObjectDeploy(DeployModel):
    name: str
    key: str
    content: str
    # Kept in the bucket when a later revision no longer lists it: a pod of the old revision may still read it.
    retain_on_delete: bool = False


# --- Kubernetes ------------------------------------------------------------------------------------------------


class AppliedObject(DeployModel):
    """One rendered Kubernetes object, applied as it is."""

    name: str  # logical name: kind-namespace-name
    manifest: dict[str, Any]
    waits_for: tuple[str, ...]
    ignore_changes: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()  # earlier logical names (a renamed Triton server's objects)


class SecretDeploy(DeployModel):
    """The Hugging Face token Secret: its data is a Pulumi secret, so only the program writes it."""

    name: str
    metadata: dict[str, Any]
    data_key: str
    waits_for: tuple[str, ...]
    aliases: tuple[str, ...] = ()  # earlier logical names of the same Secret


class HelmReleaseDeploy(DeployModel):
    """A cluster prerequisite installed from its chart, pinned."""

    name: str  # the Helm release name (fixed: charts derive service names from it)
    chart: str
    version: str
    repository: str | None  # None: ``chart`` is an oci:// reference
    namespace: str
    values: dict[str, Any]
    waits_for: tuple[str, ...]
    identity: PodIdentityDeploy | None = None
    timeout_s: int = 900


class TritonDeploy(DeployModel):
    name: str
    team: str = SHARED  # the modelfleet.io/team tag of its AWS resources (its models' team, plan/teams.py)
    aliases: tuple[str, ...] = ()  # the server's former names (TritonServerPlan.former_names)
    objects: tuple[S3ObjectDeploy, ...]
    identity: PodIdentityDeploy
    manifests: tuple[AppliedObject, ...]


class VllmDeploy(DeployModel):
    name: str
    team: str = "unassigned"  # the modelfleet.io/team tag of its AWS resources (the model's team)
    identity: PodIdentityDeploy | None  # streamed from S3 (an s3:// artifact or a staged Hub checkpoint)
    hf_secret: SecretDeploy | None  # read from the Hub (by the pods or the staging Job)
    hf_token_required: bool = True  # the Hub repository is gated or private (VllmModelPlan.hub_token_required)
    stage_identity: PodIdentityDeploy | None = None  # a staged Hub checkpoint's Job: writes its revision's prefix
    manifests: tuple[AppliedObject, ...]


class DeployPlan(DeployModel):
    stack: str
    project: str
    cluster: ClusterDeploy
    node_role: RoleDeploy
    system_node_group: NodeGroupDeploy | None  # created clusters only
    node_groups: tuple[NodeGroupDeploy, ...]
    cluster_objects: tuple[AppliedObject, ...]
    releases: tuple[HelmReleaseDeploy, ...]
    repository: BucketDeploy | None
    triton_servers: tuple[TritonDeploy, ...]
    vllm_models: tuple[VllmDeploy, ...]
    outputs: dict[str, Any]
    warnings: tuple[str, ...]  # for whoever runs `pulumi preview` / `pulumi up` (pulumi.log.warn)
    notes: tuple[str, ...] = ()  # expected changes worth saying, e.g. a desired size the new bounds move
