"""Each node group's disks and what its kubelet offers, once the plan holds every workload placed on it:
where the pods write (capacity/node_volume.py), the root volume, and the allocatable resources (hardware/kubelet.py)."""

from __future__ import annotations

from ...spec.environment import EnvironmentSpec
from .fit import allowance_plan
from ..hardware.instances import InstanceCatalogue
from ..hardware.kubelet import allocatable, node_ami_type
from .node_volume import on_instance_store, size_root_volume
from ..types import FleetPlan, NodeGroupPlan, NodeResourcesPlan


def node_disks(plan: FleetPlan, group: NodeGroupPlan, env: EnvironmentSpec, catalogue: InstanceCatalogue) -> dict:
    deploy = env.deploy
    instance = catalogue.node_type(group.instance_type)
    assert instance is not None  # the compiler placed it from the catalogue
    ami = node_ami_type(deploy.ami_type, group.device)
    store = on_instance_store(plan, group.name, instance, ami, deploy.daemonset_allowance)  # type: ignore[arg-type]
    volume = size_root_volume(plan, group.name, deploy.node_disk_gib, ami, deploy.daemonset_allowance, store)
    offered = allocatable(instance, ami, instance.instance_store_gib if store else volume.size_gib)  # type: ignore[arg-type]
    return {"ephemeral_storage_on": "instance-store" if store else "root-volume",
            "instance_store_gib": instance.instance_store_gib, "root_volume_gib": volume.size_gib,
            "root_volume_iops": volume.iops, "root_volume_throughput_mibps": volume.throughput_mibps,
            "allocatable": NodeResourcesPlan(cpu=offered.cpu_millis / 1000, memory_gib=round(offered.memory_mib / 1024, 2),
                                             ephemeral_storage_gib=offered.ephemeral_storage_gib, gpus=offered.gpus,
                                             pods=offered.pods),
            "daemonset_allowance": allowance_plan(deploy.daemonset_allowance.for_node(instance.vcpu, instance.gpus))}


def with_node_disks(plan: FleetPlan, env: EnvironmentSpec, catalogue: InstanceCatalogue) -> FleetPlan:
    groups = tuple(NodeGroupPlan.model_construct(**{**dict(g), **node_disks(plan, g, env, catalogue)})
                   for g in plan.node_groups)
    return plan.model_copy(update={"node_groups": groups})
