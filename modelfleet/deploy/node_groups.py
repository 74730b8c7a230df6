"""Node groups as EKS gets them: the planned GPU and CPU groups (and a created cluster's system group), with
their taint, labels, volume, and a scaling config EKS accepts given what is running now.

GPU groups boot the stack's NVIDIA AMI and carry the ``nvidia.com/gpu`` taint, so only GPU pods land there.
CPU groups (KIND_CPU Triton servers, plan/triton/cpu_placement.py) boot the same AMI family without the driver
(AL2023_x86_64_STANDARD or BOTTLEROCKET_x86_64: plan/kubelet.node_ami_type), carry no taint and no GPU label,
and get no device plugin (render/k8s/cluster.py selects GPU types only); their pods select them by instance
type and capacity type, as every workload here does.

Scaling: once a group exists the cluster autoscaler owns its desired size, so Pulumi ignores it... unless
the plan moves min or max past it. EKS rejects an update whose min is above the desired size it is sent,
and a provider that ignores the desired size sends the one from the last deploy ("Minimum capacity 4 can't
be greater than desired size 3"; terraform-aws-eks #748, #944, #2030). So the program reads each group's
live scaling config first and, when the planned bounds differ from the live ones, sends the live desired
size clamped into the new bounds (hashicorp/terraform-provider-aws #18310 proposes the same rule).

Zones: a plan group with a zonal layout (multi-node replicas, modelfleet.plan.capacity.node_groups) becomes one EKS node
group per zone, ``<group>-<zone>``, on that zone's subnets only: zone-i is the i-th availability zone, in
name order, of the subnets the groups use (the stack's ``cluster.subnetIds``, else the cluster's own), as
the program reads them (``LiveCluster``).

Updates: EKS replaces a group's nodes by draining them and gives up after 15 minutes of evictions a
PodDisruptionBudget refuses (``PodEvictionFailure``). A multi-node replica's budget refuses every eviction
while any of its groups is coming back, which takes longer than that (a reload of hundreds of GiB), so a
zonal group is updated **forced**: EKS drains what the budget allows and then goes on. What keeps the
fleet serving instead is the order: each zone's group waits for the previous zone's (``after``), and takes
down one replica's nodes at a time (``update_max_unavailable``), so at most one zone's replica is
replaced at once. Other groups update one node at a time within their budgets, not forced.

Disks: where the plan puts the pods' writes on the instance store, the launch template carries the user
data that makes the node's bootstrap stripe the NVMe disks RAID0 and move the kubelet's and containerd's
directories there: nodeadm's ``spec.instance.localStorage.strategy: RAID0`` (AL2023) or Bottlerocket's
``apiclient ephemeral-storage init`` and ``bind`` as an essential bootstrap command.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import Issue
from ..plan.hardware.kubelet import node_ami_type
from ..plan.teams import node_group_team
from ..plan.hardware.system_nodes import SYSTEM_DISK_GIB, SYSTEM_DISK_IOPS, SYSTEM_DISK_MIBPS, SYSTEM_GROUP, SYSTEM_SIZES
from ..plan.types import FleetPlan, NodeGroupPlan, VllmModelPlan
from ..render.k8s.common import NODE_GROUP_LABEL
from ..spec.environment import EnvironmentSpec
from ..spec.team import SHARED
from .types import (
    CPU_NODE_GROUP_TYPE,
    GPU_NODE_GROUP_TYPE,
    SYSTEM_NODE_GROUP_TYPE,
    LaunchTemplateDeploy,
    LiveNodeGroup,
    LiveSubnet,
    NodeGroupDeploy,
    ScalingDeploy,
    Taint,
)

GPU_TAINT = Taint(key="nvidia.com/gpu", value="true", effect="NO_SCHEDULE")
GROUP_LABEL, GPU_LABEL, STACK_TAG = NODE_GROUP_LABEL, "modelfleet.io/gpu", "modelfleet.io/stack"
# The volume that holds images and emptyDirs: AL2023 has one root volume; Bottlerocket keeps its OS on
# /dev/xvda and containers on the data volume /dev/xvdb.
DATA_DEVICE = {"AL2023_x86_64_NVIDIA": "/dev/xvda", "BOTTLEROCKET_x86_64_NVIDIA": "/dev/xvdb",
               "AL2023_x86_64_STANDARD": "/dev/xvda", "BOTTLEROCKET_x86_64": "/dev/xvdb"}
CAPACITY_TYPES = {"on-demand": "ON_DEMAND", "spot": "SPOT"}
# A created cluster's untainted group for CoreDNS and the controllers: its sizes and disk are in system_nodes.py,
# which the cost preview prices too.
SYSTEM_AMI = "AL2023_x86_64_STANDARD"


def live_group(name: str, live: Sequence[LiveNodeGroup], stack: str) -> LiveNodeGroup | None:
    """The running group this plan's group ``name`` is (EKS name: the prefix and a provider suffix of hex
    digits), tagged as this stack's; the largest if a replacement left two."""
    prefix = f"{name}-"
    matches = [g for g in live if g.name.startswith(prefix) and g.name[len(prefix):].isalnum()
               and g.tags.get(STACK_TAG) == stack and g.tags.get(GROUP_LABEL) == name]
    return max(matches, key=lambda g: g.desired_size, default=None)


def scaling(sizes: tuple[int, int, int], live: LiveNodeGroup | None) -> ScalingDeploy:
    """See the module docstring. ``sizes``: the planned (min, desired, max)."""
    low, desired, high = sizes
    autoscaled = high > low
    if live is None or not autoscaled:
        return ScalingDeploy(min_size=low, desired_size=desired, max_size=high, ignore_desired=autoscaled,
                             note="" if live is None or live.desired_size == desired else
                             f"desired {live.desired_size} -> {desired}: a fixed size")
    if (live.min_size, live.max_size) == (low, high):
        return ScalingDeploy(min_size=low, desired_size=desired, max_size=high, ignore_desired=True)
    kept = min(high, max(low, live.desired_size))
    why = (f"desired {live.desired_size} -> {kept}: the new bounds exclude the live size" if kept != live.desired_size
           else f"desired stays at the live {kept} while min/max change")
    return ScalingDeploy(min_size=low, desired_size=kept, max_size=high, ignore_desired=False, note=why)


ZONE_LABEL = "modelfleet.io/zone"
NODEADM_RAID0 = """MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="//"

--//
Content-Type: application/node.eks.aws

apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  instance:
    localStorage:
      strategy: RAID0
--//--
"""
BOTTLEROCKET_EPHEMERAL = """[settings.bootstrap-commands.k8s-ephemeral-storage]
commands = [["apiclient", "ephemeral-storage", "init"], ["apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"]]
essential = true
mode = "always"
"""
INSTANCE_STORE_USER_DATA = {"AL2023_x86_64_NVIDIA": NODEADM_RAID0, "BOTTLEROCKET_x86_64_NVIDIA": BOTTLEROCKET_EPHEMERAL}


def _labels(group: NodeGroupPlan) -> dict[str, str]:
    if group.device == "cpu":
        return {GROUP_LABEL: group.name}
    return {GROUP_LABEL: group.name, GPU_LABEL: group.gpu_model.replace(" ", "-")}


def zone_subnets(subnets: Sequence[LiveSubnet]) -> dict[str, tuple[str, ...]]:
    """zone-i -> the subnets of the i-th availability zone (in name order) of ``subnets``."""
    zones = sorted({s.zone for s in subnets})
    return {f"zone-{i}": tuple(sorted(s.id for s in subnets if s.zone == zone)) for i, zone in enumerate(zones, 1)}


def _template(group: NodeGroupPlan, name: str, env: EnvironmentSpec, labels: dict[str, str]) -> LaunchTemplateDeploy:
    """Its instance tags carry no team: they are part of the template's version, so a model of another team
    joining the group would roll its nodes. The team tag is on the node group and the template resource."""
    volume = group.root_volume
    store = group.ephemeral_storage_on == "instance-store"  # never on the CPU types (EBS-only in the catalogue)
    ami = node_ami_type(env.deploy.ami_type, group.device)
    return LaunchTemplateDeploy(name=f"{name}-lt", device_name=DATA_DEVICE[ami],
                                volume_gib=volume.size_gib, throughput_mibps=volume.throughput_mibps, iops=volume.iops,
                                tags=labels, user_data=INSTANCE_STORE_USER_DATA[ami] if store else None)


def _replica_nodes(plan: FleetPlan, group: NodeGroupPlan) -> int:
    return max((m.nodes_per_replica for m in plan.models if isinstance(m, VllmModelPlan) and m.node_group == group.name),
               default=1)


def gpu_node_groups(plan: FleetPlan, group: NodeGroupPlan, env: EnvironmentSpec, live: Sequence[LiveNodeGroup],
                    subnets: Sequence[LiveSubnet]) -> tuple[NodeGroupDeploy, ...]:
    """The plan group as EKS node groups: one, or one per zone of a zonal layout (see the module docstring)."""
    if not group.zonal:
        return (gpu_group(group, group.name, env, live, (group.min_size, group.desired_size, group.max_size),
                           env.cluster.subnet_ids, team=node_group_team(plan, group)),)
    by_zone, out = zone_subnets(subnets), []
    for zone in group.zonal:
        name = f"{group.name}-{zone.zone}"
        deployed = gpu_group(group, name, env, live, (zone.min_size, zone.desired_size, zone.max_size),
                              by_zone.get(zone.zone, ()), zone.zone, node_group_team(plan, group))
        out.append(deployed.model_copy(update={"update_max_unavailable": _replica_nodes(plan, group),
                                               "force_update": True, "after": (out[-1].name,) if out else ()}))
    return tuple(out)


def gpu_group(group: NodeGroupPlan, name: str, env: EnvironmentSpec, live: Sequence[LiveNodeGroup],
               sizes: tuple[int, int, int], subnet_ids: tuple[str, ...], zone: str | None = None,
               team: str = SHARED) -> NodeGroupDeploy:
    labels = _labels(group) | ({ZONE_LABEL: zone} if zone else {})
    return NodeGroupDeploy(name=name, name_prefix=f"{name}-", instance_type=group.instance_type,
                           capacity_type=CAPACITY_TYPES[group.capacity_type],
                           ami_type=node_ami_type(env.deploy.ami_type, group.device), device=group.device,
                           labels=labels, tags=labels | {GROUP_LABEL: name, STACK_TAG: env.name},
                           taints=(GPU_TAINT,) if group.device == "gpu" else (),
                           scaling=scaling(sizes, live_group(name, live, env.name)),
                           launch_template=_template(group, name, env, labels), subnet_ids=subnet_ids,
                           protect=env.protect, team=team, zone=zone, plan_group=group.name if zone else None)


def zone_issues(plan: FleetPlan, subnets: Sequence[LiveSubnet], file: str) -> list[Issue]:
    """A zonal group needs as many zones among the subnets as it has zone groups."""
    known = zone_subnets(subnets)
    issues = []
    for group in plan.node_groups:
        missing = [z.zone for z in group.zonal if z.zone not in known]
        if missing:
            issues.append(Issue(file, 0, 0, "config.modelfleet:cluster.subnetIds",
                                f"node group {group.name} needs one node group per zone ({len(group.zonal)} zones: a "
                                f"multi-node replica sits whole in one zone), but the subnets span {len(known)} zone(s)",
                                "list private subnets in as many availability zones as modelfleet:availabilityZones "
                                "says, or lower availabilityZones"))
    return issues


def system_node_group(env: EnvironmentSpec, live: Sequence[LiveNodeGroup]) -> NodeGroupDeploy:
    labels = {GROUP_LABEL: SYSTEM_GROUP}
    template = LaunchTemplateDeploy(name=f"{SYSTEM_GROUP}-lt", device_name=DATA_DEVICE[SYSTEM_AMI],
                                    volume_gib=SYSTEM_DISK_GIB, throughput_mibps=SYSTEM_DISK_MIBPS,
                                    iops=SYSTEM_DISK_IOPS, tags=labels)
    return NodeGroupDeploy(name=SYSTEM_GROUP, name_prefix=f"{SYSTEM_GROUP}-",
                           instance_type=env.cluster.system_instance_type, capacity_type="ON_DEMAND",
                           ami_type=SYSTEM_AMI, labels=labels, tags=labels | {STACK_TAG: env.name}, taints=(),
                           scaling=scaling(SYSTEM_SIZES, live_group(SYSTEM_GROUP, live, env.name)),
                           launch_template=template, subnet_ids=env.cluster.subnet_ids, protect=env.protect)


def _replaced_by(planned: NodeGroupDeploy, live: LiveNodeGroup) -> list[str]:
    """What of ``planned`` differs from ``live`` in a way EKS can only apply by a new group."""
    changes = [f"{what} {old} -> {new}" for what, old, new in (
        ("AMI type", live.ami_type, planned.ami_type), ("capacity type", live.capacity_type, planned.capacity_type),
        ("instance types", ",".join(live.instance_types), planned.instance_type))
        if old != new]
    if planned.subnet_ids and set(planned.subnet_ids) != set(live.subnet_ids):
        changes.append("subnets")
    return changes


def node_group_urn(stack: str, project: str, name: str) -> str:
    """The URN Pulumi gives the aws:eks NodeGroup ``name`` under its component (for `pulumi state`)."""
    component = (SYSTEM_NODE_GROUP_TYPE if name == SYSTEM_GROUP else
                 CPU_NODE_GROUP_TYPE if name.startswith("cpu-") else GPU_NODE_GROUP_TYPE)
    return f"urn:pulumi:{stack}::{project}::{component}$aws:eks/nodeGroup:NodeGroup::{name}"


def protected_changes(groups: Sequence[NodeGroupDeploy], live: Sequence[LiveNodeGroup], env: EnvironmentSpec,
                      project: str) -> list[str]:
    """Protected groups this deploy would delete or replace: Pulumi creates the new groups, then stops at the
    protected one (create-before-delete cannot finish). Each message says what to run before ``pulumi up``."""
    if not env.protect:
        return []
    planned = {g.name: g for g in groups}
    messages = []
    for group in sorted(live, key=lambda g: g.name):
        name = group.tags.get(GROUP_LABEL, "")
        if group.tags.get(STACK_TAG) != env.name or not name:
            continue
        target = planned.get(name)
        changes = ["the plan no longer has it"] if target is None else _replaced_by(target, group)
        if changes:
            messages.append(f"protected node group {name} ({group.name}) would be "
                            f"{'deleted' if target is None else 'replaced'} ({'; '.join(changes)}): `pulumi up` "
                            "would create the new groups and then fail; first run `pulumi state unprotect "
                            f"'{node_group_urn(env.name, project, name)}'` (docs/operations/deploying.md, \"Replacing a protected node group\")")
    return messages
