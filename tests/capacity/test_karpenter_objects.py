"""Karpenter stacks: NodePools and EC2NodeClasses valid against the real CRDs, their types fit-checked, multi-node
replicas kept in one zone, the node role, interruption queue and the offline preview."""

from __future__ import annotations

import pytest

from modelfleet.cli import main
from modelfleet.deploy import compile_deploy_plan
from modelfleet.plan.capacity.provisioning import variant_fits
from modelfleet.plan.hardware.node_price import ranking_usd_per_node_hour
from modelfleet.plan.types import VllmModelPlan
from tests.capacity.fleets import BLOCK, KARPENTER, SCALE_TO_ZERO, project_with, stack_config
from tests.components.mocked import k8s_objects, of_type, run
from tests.hardening.judges import crd_errors

CASES = {  # stack -> the changes that make it a Karpenter stack (and more)
    "dev": KARPENTER | SCALE_TO_ZERO | {"modelfleet:capacityReservations": [BLOCK]},
    "staging": KARPENTER,
    "prod": KARPENTER | {"modelfleet:capacityType": "spot"},
}


@pytest.fixture(scope="module")
def karpenter(tmp_path_factory):
    """stack -> (project, deployment, deploy plan) of each Karpenter variant."""
    out = {}
    for stack, changes in CASES.items():
        project = project_with(tmp_path_factory.mktemp(stack), stack, changes)
        deployment = project.deployment(stack, stack_config(stack, **changes))
        out[stack] = project, deployment, compile_deploy_plan(deployment)
    return out


def cel_errors(obj: dict) -> list[str]:
    """The CEL rules (x-kubernetes-validations) jsonschema does not evaluate, those our objects could break."""
    spec, errors = obj["spec"], []
    if obj["kind"] == "EC2NodeClass":
        if ("role" in spec) == ("instanceProfile" in spec):
            errors.append("exactly one of role, instanceProfile")
        if not spec["subnetSelectorTerms"] or any(("id" in t) == ("tags" in t) for t in spec["subnetSelectorTerms"]):
            errors.append("subnetSelectorTerms: one of id, tags each")
        if any(set(t) - {"id"} and "id" in t for t in spec.get("capacityReservationSelectorTerms", [])):
            errors.append("capacityReservationSelectorTerms: id is exclusive")
        if any("alias" in t and len(t) > 1 for t in spec["amiSelectorTerms"]):
            errors.append("amiSelectorTerms: alias is exclusive")
    if obj["kind"] == "NodePool":
        keys = [r["key"] for r in spec["template"]["spec"]["requirements"]]
        if any(k.split("/")[0].endswith("karpenter.sh") and k != "karpenter.sh/capacity-type" for k in keys):
            errors.append("restricted karpenter.sh label")
    return errors


def test_every_object_validates_against_the_real_crds(karpenter):
    counts = {"NodePool": 0, "EC2NodeClass": 0}
    for stack, (_, _, fleet) in karpenter.items():
        assert fleet.karpenter is not None and not fleet.node_groups, stack
        for obj in fleet.karpenter.objects:
            manifest = obj.manifest
            assert crd_errors(manifest) == [] and cel_errors(manifest) == [], (stack, obj.name)
            counts[manifest["kind"]] += 1
    assert counts["NodePool"] >= counts["EC2NodeClass"] > 0  # every class has its pool (and a base pool on spot)


def test_each_plan_group_has_a_class_and_pools_sized_from_the_plan(karpenter):
    for _, deployment, fleet in karpenter.values():
        objects = {(o.manifest["kind"], o.manifest["metadata"]["name"]): o.manifest for o in fleet.karpenter.objects}
        for group in deployment.plan.node_groups:
            node_class = objects[("EC2NodeClass", group.name)]["spec"]
            pool = objects[("NodePool", group.name)]["spec"]
            requirements = {r["key"]: r["values"] for r in pool["template"]["spec"]["requirements"]}
            assert requirements["node.kubernetes.io/instance-type"][0] == group.instance_type
            assert requirements["karpenter.sh/capacity-type"] == list(group.capacity_types)
            assert pool["template"]["metadata"]["labels"]["modelfleet.io/node-group"] == group.name
            assert pool["disruption"]["consolidationPolicy"] == "WhenEmpty"
            held = group.max_size - group.on_demand_base_nodes
            if group.device == "gpu":
                assert pool["limits"] == {"nvidia.com/gpu": str(max(1, held) * group.gpus_per_node)}
                assert pool["template"]["spec"]["taints"][0]["key"] == "nvidia.com/gpu"
            assert (node_class.get("instanceStorePolicy") == "RAID0") == (group.ephemeral_storage_on == "instance-store")
            assert node_class["blockDeviceMappings"][0]["ebs"]["volumeSize"] == f"{group.root_volume_gib}Gi"
            assert [t["id"] for t in node_class.get("capacityReservationSelectorTerms", [])] == [
                r.id for r in group.reservations]


def test_allowed_types_are_equivalents_that_pass_the_fit_check_in_cost_order(karpenter):
    for project, deployment, _ in karpenter.values():
        plan, env, catalogue = deployment.plan, deployment.env, project.catalogue()
        for group in plan.node_groups:
            chosen = catalogue.node_type(group.instance_type)
            types = [catalogue.node_type(t) for t in group.instance_types]
            assert types[0].name == group.instance_type
            if group.device == "gpu":
                assert all(t.gpu.key == chosen.gpu.key and t.gpus == chosen.gpus for t in types), group.name
                assert all(variant_fits(plan, group, t, env, catalogue) for t in types[1:]), group.name
                ranked = [ranking_usd_per_node_hour(catalogue, t, env) for t in types]
                assert ranked[1:] == sorted(ranked[1:]), group.name  # the chosen type leads: see the next test


def test_a_reserved_type_leads_its_pool_where_an_equivalent_ranks_cheaper(karpenter):
    """dev's 70B runs on its capacity block of g6e.12xlarge (5.2 USD/h): the plan sized and priced that type, so
    it leads the pool's types, though g6e.24xlarge (the same 4 L40S) ranks cheaper on spot (5.7615 against
    6.015); the equivalents follow in cost order. (So does prod's 8B on g6e.xlarge: g6e.2xlarge ranks cheaper on
    spot alone, 1.0895 against 1.1975, but its floor of 2 replicas is priced on-demand, 2.24208 against 1.861.)"""
    project, deployment, _ = karpenter["dev"]
    group = next(g for g in deployment.plan.node_groups if "reserved" in g.capacity_types)
    assert (group.instance_type, group.instance_types) == ("g6e.12xlarge", ("g6e.12xlarge", "g6e.24xlarge"))
    catalogue, env = project.catalogue(), deployment.env
    assert (ranking_usd_per_node_hour(catalogue, catalogue.instances["g6e.24xlarge"], env)
            < ranking_usd_per_node_hour(catalogue, catalogue.instances["g6e.12xlarge"], env))


def test_a_type_that_fails_the_fit_check_is_left_out(karpenter):
    """prod's 8B model: its pods ask for what a g5.xlarge offers; a smaller-memory type of the same GPU would
    not fit. Take the dev 70B group on g6e.12xlarge and shrink a copy of g6e.24xlarge's RAM: it is rejected."""
    import dataclasses
    from types import MappingProxyType

    from modelfleet.plan.capacity.provisioning import equivalent_types

    project, deployment, _ = karpenter["staging"]
    plan, env, catalogue = deployment.plan, deployment.env, project.catalogue()
    group = next(g for g in plan.node_groups if len(g.instance_types) > 1 and g.device == "gpu")
    other = catalogue.instances[group.instance_types[1]]
    starved = dataclasses.replace(other, ram_gib=4.0, vcpu=2)
    table = dataclasses.replace(catalogue, instances=MappingProxyType({**catalogue.instances, other.name: starved}))
    kept = equivalent_types(plan, group, env, table, group.capacity_types)
    assert other.name not in kept and group.instance_type in kept


def test_multi_node_replicas_stay_whole_in_one_zone(karpenter):
    _, deployment, fleet = karpenter["prod"]
    multi = [m for m in deployment.plan.models if isinstance(m, VllmModelPlan) and m.nodes_per_replica > 1]
    assert multi
    pools = {o.manifest["metadata"]["name"]: o.manifest for o in fleet.karpenter.objects if o.manifest["kind"] == "NodePool"}
    for model in multi:
        lws = next(o.manifest for m in fleet.vllm_models for o in m.manifests
                   if m.name == model.name and o.manifest["kind"] == "LeaderWorkerSet")
        for role in ("leaderTemplate", "workerTemplate"):
            pod = lws["spec"]["leaderWorkerTemplate"][role]["spec"]
            (term,) = pod["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            assert term["topologyKey"] == "topology.kubernetes.io/zone"
            assert pod["nodeSelector"] == {"modelfleet.io/node-group": model.node_group}
        # drift and expiry take one replica's nodes at a time, never part of two
        assert pools[model.node_group]["spec"]["disruption"]["budgets"] == [{"nodes": str(model.nodes_per_replica)}]


def test_spot_pools_get_an_interruption_queue_and_an_on_demand_base(karpenter):
    _, deployment, fleet = karpenter["prod"]
    assert fleet.karpenter.queue_name and {r.name for r in fleet.karpenter.rules} >= {"karpenter-spot-interruption"}
    pools = {o.manifest["metadata"]["name"]: o.manifest for o in fleet.karpenter.objects if o.manifest["kind"] == "NodePool"}
    for group in deployment.plan.node_groups:
        assert group.capacity_types == ("spot", "on-demand")
        base = pools[f"{group.name}-base"]["spec"]
        assert base["weight"] == 100 and base["template"]["spec"]["requirements"][1]["values"] == ["on-demand"]
        assert group.on_demand_base_nodes == group.min_size  # prod's floors are all high-availability
    _, _, staging = karpenter["staging"]
    assert staging.karpenter.queue_name is None and staging.karpenter.rules == ()  # on-demand: nothing to drain


def test_joined_cluster_is_told_what_karpenter_it_needs(karpenter):
    _, _, fleet = karpenter["staging"]
    assert any("must run Karpenter 1.6.0 or later" in w for w in fleet.warnings)


def test_created_cluster_installs_karpenter_not_the_autoscaler(tmp_path):
    changes = KARPENTER | {"modelfleet:cluster": {"create": True, "name": "ml-dev", "publicAccessCidrs": [],
                                                  "subnetIds": ["subnet-0a1", "subnet-0b2"]}}
    project = project_with(tmp_path, "staging", changes)
    fleet = compile_deploy_plan(project.deployment("staging", stack_config("staging", **changes)))
    names = [r.name for r in fleet.releases]
    assert "karpenter" in names and "cluster-autoscaler" not in names
    pools = [o for o in fleet.karpenter.objects if o.manifest["kind"] == "NodePool"]
    assert all("release:karpenter" in o.waits_for for o in pools)


@pytest.mark.slow
def test_offline_preview_shows_node_pools(tmp_path, capsys):
    project_with(tmp_path, "prod", CASES["prod"])
    assert main(["--project", str(tmp_path), "preview", "--stack", "prod"]) == 0
    out = capsys.readouterr().out
    assert "k8s:NodePool gpu-p5-48xlarge-spot" in out and "k8s:EC2NodeClass gpu-p5-48xlarge-spot" in out
    assert "KarpenterNodes" in out and "aws:sqs:Queue" in out


@pytest.mark.slow
def test_the_program_under_mocks_registers_pools_for_every_workload():
    result = run("dev", config=stack_config("dev", **CASES["dev"]))
    objects = k8s_objects(result)
    assert ("NodePool", "gpu-g6e-12xlarge-spot") in objects
    assert of_type(result, "aws:eks/accessEntry:AccessEntry")
    assert not of_type(result, "aws:eks/nodeGroup:NodeGroup")
