"""Every pod schedules on a real EKS cluster (issue 12): the kubelet's allocatable as the AMIs compute it, the
fit check, and the rendered manifests read against the node groups they land on."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from modelfleet.errors import CompileError
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.hardware.kubelet import allocatable, ephemeral_allocatable_gib, kube_reserved_cpu_millis, max_pods
from modelfleet.plan.types import FleetPlan
from modelfleet.render.manifests import render_fleet_manifests
from modelfleet.spec.environment import DeploySettings, EnvironmentSpec
from modelfleet.spec.models import FleetSpec, LlmModelSpec
from tests.conftest import STACKS, update_golden
from tests.cost.fleets import ENVIRONMENTS, fleets

AL2023 = "AL2023_x86_64_NVIDIA"
UNITS = {"Mi": 1 / 1024, "Gi": 1.0, "m": 1 / 1000}


def quantity(value) -> float:
    """A Kubernetes quantity in cores or GiB ("3420m", "7926Mi", "5Gi", 8)."""
    text = str(value)
    for suffix, scale in UNITS.items():
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * scale
    return float(text)


# --------------------------------------------------------------------------- the kubelet, as the AMIs set it up
def test_kubelet_reserves_as_nodeadm_computes_them(catalogue):
    """The issue's figures: a p5.48xlarge offers about 191.45 of its 192 vCPU, a g5.xlarge 3.92 of 4;
    memory loses 255 MiB + 11 MiB per pod of maxPods and the 100 MiB eviction threshold."""
    p5, g5 = catalogue.instances["p5.48xlarge"], catalogue.instances["g5.xlarge"]
    assert kube_reserved_cpu_millis(192) == 60 + 10 + 10 + 470 and kube_reserved_cpu_millis(4) == 80
    assert allocatable(p5, AL2023, 30000).cpu_millis == 191_450
    assert allocatable(g5, AL2023, 232).cpu_millis == 3_920
    assert max_pods(p5) == 100  # its ENI limit, under the managed node groups' cap of 250 above 30 vCPU
    assert max_pods(catalogue.instances["g5.12xlarge"]) == 250  # 737 by ENIs, capped
    assert max_pods(g5) == 58
    assert allocatable(g5, AL2023, 232).memory_mib == math.floor(16 * 1024 * 0.925) - (11 * 58 + 255) - 100


def test_the_kubelet_offers_0_9_of_the_disk_less_1_gib():
    assert ephemeral_allocatable_gib(900, AL2023) == pytest.approx(809.0)  # the 405B's old volume
    assert ephemeral_allocatable_gib(1000, "BOTTLEROCKET_x86_64_NVIDIA") == pytest.approx(849.0)  # imagefs 15%


# --------------------------------------------------------------------------- the example stacks
@pytest.mark.parametrize("stack", STACKS)
def test_every_node_group_fits_at_hpa_max_plus_surge(plans, stack):
    """Done means: the prod, staging and dev renders pass the fit check (the plan records each group's
    busiest node), and every node keeps the DaemonSet allowance free."""
    for group in plans[stack].node_groups:
        a, r = group.allocatable, group.requested
        assert r.cpu <= a.cpu and r.memory_gib <= a.memory_gib and r.gpus <= a.gpus and r.pods <= a.pods, group.name
        assert r.ephemeral_storage_gib <= a.ephemeral_storage_gib, group.name
        assert a.cpu - (r.cpu - group.daemonset_allowance.cpu) >= group.daemonset_allowance.cpu - 1e-9


def test_cpu_requests_leave_the_daemonset_allowance(plans, project):
    """Defect 10: the p5 pods requested 190 of about 191.45 allocatable vCPU (1.45 left for every DaemonSet),
    the Triton pod on g5.xlarge 3 of 3.92. Each now requests its GPUs' share of allocatable less the allowance."""
    plan = plans["prod"]
    manifests = render_fleet_manifests(plan, project.environment("prod").deploy)
    allowance = plan.node_group(plan.model("llama-3-1-405b-instruct").node_group).daemonset_allowance.cpu
    lws = next(o for o in manifests["llama-3-1-405b-instruct"] if o["kind"] == "LeaderWorkerSet")
    cpu = quantity(lws["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["resources"]["requests"]["cpu"])
    assert cpu == pytest.approx(191.45 - allowance) and 191.45 - cpu >= allowance - 1e-9
    allowance = plan.node_group(plan.server("triton-g5-xlarge").node_group).daemonset_allowance.cpu
    triton = next(o for o in manifests["triton-g5-xlarge"] if o["kind"] in ("Deployment", "Rollout"))
    cpu = quantity(triton["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"])
    assert cpu == pytest.approx(3.92 - allowance)


# What a GPU node's DaemonSets request (their charts' and add-ons' defaults): aws-node and its network-policy
# agent, kube-proxy, the EBS CSI node plugin (3 containers), the NVIDIA device plugin, dcgm-exporter,
# node-exporter, a log shipper and a metrics agent (CloudWatch's 200m / 200 MiB).
DAEMONSETS_CPU = 0.025 + 0.025 + 0.1 + 0.03 + 0.05 + 0.1 + 0.1 + 0.2
DAEMONSETS_MEMORY_GIB = (120 + 64 + 256 + 64 + 200) / 1024
DAEMONSETS_PODS = 9


def test_the_default_allowance_covers_a_gpu_nodes_daemonsets_and_grows_with_the_node(plans):
    """The default was 0.5 CPU, 1 GiB and 8 pods on every node: the p5 pods requested 190.95 of 191.45 CPU,
    less than the DaemonSets above request. It now covers them on every node and grows with its cores and GPUs;
    a value a stack sets is kept as is."""
    groups = {g.instance_type: g.daemonset_allowance for g in plans["prod"].node_groups}
    for allowance in groups.values():
        assert allowance.cpu >= DAEMONSETS_CPU - 1e-9 and allowance.pods >= DAEMONSETS_PODS
    assert all(groups[t].memory_gib >= DAEMONSETS_MEMORY_GIB for t in ("g5.xlarge", "p5.48xlarge"))
    assert groups["p5.48xlarge"].cpu > groups["g5.xlarge"].cpu + 0.5  # 192 vCPU against 4
    assert groups["p5.48xlarge"].memory_gib > groups["g5.xlarge"].memory_gib  # 8 GPUs' exporters against 1
    set_ = DeploySettings.model_validate({"daemonsetAllowance": {"cpu": 2, "memoryGib": 4}}).daemonset_allowance
    assert (set_.for_node(192, 8).cpu, set_.for_node(4, 1).memory_gib) == (2, 4)


def test_an_allowance_the_nodes_cannot_spare_is_a_located_error(project, catalogue):
    """A cluster whose DaemonSets need 4 cores per node cannot run a 4-vCPU node's serving pod: the compile
    says which workload, node group, resource and by how much, and what to change."""
    env = project.environment("prod")
    deploy = env.deploy.model_copy(update={"daemonset_allowance": env.deploy.daemonset_allowance.model_copy(
        update={"cpu": 3.9})})
    with pytest.raises(CompileError) as caught:
        compile_fleet(project.fleet(), env.model_copy(update={"deploy": deploy}), catalogue)
    messages = [str(i) for i in caught.value.issues]
    assert any("triton-g5-xlarge: a pod cannot schedule on gpu-g5-xlarge-od (g5.xlarge)" in m
               and "CPU cores > 0.02" in m and "daemonsetAllowance" in m for m in messages), messages
    assert all(i.path.startswith("models[") for i in caught.value.issues)


def test_rollouts_surge_into_room_the_node_group_has(plans, catalogue):
    """Defect 3: each HPA's maxReplicas was its node group's max, so at peak a rollout's surge pod never got a
    GPU. Now the plan decides per workload, and the group's max holds the HPA max plus every surge."""
    for stack in STACKS:
        plan = plans[stack]
        for group in plan.node_groups:
            gpus = 0
            for name in group.workloads:
                workload = next((s for s in plan.triton_servers if s.name == name), None) or plan.model(name)
                per_replica = workload.gpus_per_replica
                # a rolling update surges or takes one down; a canary's surge is its extra replicas at its
                # fullest step (a gateway's can reach nearly a second set: plan/rollout.canary_replicas)
                rollout = workload.rollout
                assert rollout.max_surge + rollout.max_unavailable == 1 or (
                    rollout.strategy == "canary" and rollout.max_unavailable == 0 and rollout.max_surge >= 1)
                gpus += (workload.max_replicas + workload.rollout.max_surge) * per_replica
            assert group.max_size * group.gpus_per_node >= gpus, (stack, group.name)
    model = plans["prod"].model("llama-3-1-405b-instruct")
    assert model.rollout.max_surge == 1 and "availability floor of 2" in model.rollout.reason


def test_the_405b_replicas_sit_whole_in_one_zone_each(plans):
    """Defect 2: one Auto Scaling group over three subnets spreads a 2-node replica's nodes 2/1/1. Its group
    is now one node group per zone, each sized for whole replicas, the HPA minimum's in different zones."""
    plan = plans["prod"]
    model = plan.model("llama-3-1-405b-instruct")
    group = plan.node_group(model.node_group)
    assert [z.zone for z in group.zonal] == ["zone-1", "zone-2", "zone-3"] and "per zone" in group.zone_reason
    for zone in group.zonal:
        assert zone.min_size % 2 == zone.desired_size % 2 == zone.max_size % 2 == 0
    assert sum(1 for z in group.zonal if z.min_size) == model.min_replicas == 2
    assert sum(z.max_size for z in group.zonal) == (model.max_replicas + 1) * 2 == group.max_size
    single = plan.node_group(plan.model("llama-3-1-8b-instruct").node_group)
    assert single.zonal == () and single.zones == ("zone-1", "zone-2", "zone-3")


def test_pdbs_let_one_pod_go_at_a_time(plans, project):
    """Defect 6: minAvailable = min_replicas - 1 let 3 of 4 70B pods go at once."""
    for stack in STACKS:
        for objects in render_fleet_manifests(plans[stack], project.environment(stack).deploy).values():
            for budget in (o for o in objects if o["kind"] == "PodDisruptionBudget"):
                assert budget["spec"] == {"maxUnavailable": 1, "selector": budget["spec"]["selector"]}


def test_probes_tolerate_a_busy_engine_and_pods_drain(plans, project):
    """Defect 5: vLLM's liveness was 5 s x 3 on /health, and nothing drained. Liveness now waits minutes
    (five for a multi-node group, whose restart reloads every node) where readiness waits 15 s; every
    serving container sleeps in preStop while its endpoints go, within its grace period."""
    manifests = render_fleet_manifests(plans["prod"], project.environment("prod").deploy)
    for name, objects in manifests.items():
        for workload in (o for o in objects if o["kind"] in ("Deployment", "LeaderWorkerSet")):
            templates = ([workload["spec"]["template"]] if workload["kind"] == "Deployment" else
                         [workload["spec"]["leaderWorkerTemplate"]["leaderTemplate"]])
            for template in templates:
                (container,) = template["spec"]["containers"]
                live, ready = container["livenessProbe"], container["readinessProbe"]
                live_s = live["periodSeconds"] * live["failureThreshold"]
                assert live_s >= 8 * ready["periodSeconds"] * ready["failureThreshold"], name
                assert live_s >= (300 if workload["kind"] == "LeaderWorkerSet" else 120)
                assert container["lifecycle"]["preStop"]["exec"]["command"][-1] == "sleep 15"
                assert template["spec"]["terminationGracePeriodSeconds"] > 15


def test_the_device_plugin_can_be_left_to_the_cluster(plans, project):
    """Defect 9: a cluster that runs NVIDIA's GPU Operator would get a second device plugin."""
    deploy = project.environment("prod").deploy
    kinds = lambda d: [o["kind"] for o in render_fleet_manifests(plans["prod"], d)["cluster"]]  # noqa: E731
    assert "DaemonSet" in kinds(deploy)
    assert "DaemonSet" not in kinds(deploy.model_copy(update={"install_device_plugin": False}))


def test_streamed_weights_are_budgeted_for_what_each_rank_reads(plans, project):
    """Defect 11: with runai_streamer alone every tensor-parallel rank reads the whole checkpoint, which the
    startup budget counted once: 4x short for the 70B on 4 GPUs. Now every multi-GPU replica streams in runai's
    distributed mode (the ranks split the reads), and the budget counts the pod's share: both or neither."""
    import json

    from modelfleet.render.k8s.vllm import startup_s
    model = plans["prod"].model("llama-3-3-70b-instruct")
    assert model.artifact.startswith("s3://") and model.gpus_per_pod == 8
    flag = model.args.index("--model-loader-extra-config")
    assert json.loads(model.args[flag + 1]) == {"distributed": True}
    assert startup_s(model, plans["prod"]) >= 300 + model.checkpoint_gib / model.pipeline_parallel_size / 0.5
    undistributed = model.model_copy(update={"weights": model.weights.model_copy(
        update={"distributed": False, "pod_read_gib": model.checkpoint_gib * model.gpus_per_pod})})
    assert startup_s(undistributed, plans["prod"]) >= 300 + 8 * model.checkpoint_gib / 0.5


# --------------------------------------------------------------------------- the property
def _canary_surge(canary: dict, replicas: int) -> int:
    """Pods an Argo Rollouts canary runs above ``replicas``. Without traffic routing: its maxSurge. With it
    (dynamicStableScale), each step scales the canary to its weight before the stable side shrinks to the
    rest: the most the two hold at once, over the steps."""
    if "trafficRouting" not in canary:
        return canary["maxSurge"]
    assert canary["dynamicStableScale"] is True
    weights = [0] + [step["setWeight"] for step in canary["steps"] if "setWeight" in step]
    return max(math.ceil(new * replicas / 100) + math.ceil((100 - old) * replicas / 100) - replicas
               for old, new in zip(weights, weights[1:]))


def _pods(manifests: dict) -> list[tuple[str, dict, int, int, str]]:
    """(workload, pod spec, pods at HPA max plus surge, pods per replica, node group instance type): a
    Deployment's, a canary's Rollout's (the same pod template) and a LeaderWorkerSet's worker pods."""
    out = []
    for name, objects in manifests.items():
        hpa = next((o for o in objects if o["kind"] == "HorizontalPodAutoscaler"), None)
        for obj in objects:
            if obj["kind"] not in ("Deployment", "Rollout", "LeaderWorkerSet"):
                continue
            replicas = hpa["spec"]["maxReplicas"] if hpa else obj["spec"]["replicas"]
            if obj["kind"] == "Deployment":
                spec, size = obj["spec"]["template"]["spec"], 1
                surge = obj["spec"]["strategy"]["rollingUpdate"]["maxSurge"]
            elif obj["kind"] == "Rollout":
                spec, size = obj["spec"]["template"]["spec"], 1
                surge = _canary_surge(obj["spec"]["strategy"]["canary"], replicas)
            elif obj["kind"] == "LeaderWorkerSet":
                spec, size = obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"], obj["spec"]["leaderWorkerTemplate"]["size"]
                surge = obj["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"]["maxSurge"]
            out.append((name, spec, (replicas + surge) * size, size, spec["nodeSelector"]["node.kubernetes.io/instance-type"]))
    return out


def _group_affinity(obj: dict) -> list[tuple[dict, dict]]:
    """A LeaderWorkerSet's leader and worker pods' labels, each with its podAffinity terms."""
    template = obj["spec"]["leaderWorkerTemplate"]
    return [(template[role]["metadata"]["labels"], term) for role in ("leaderTemplate", "workerTemplate")
            for term in template[role]["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]]


@pytest.mark.parametrize("stack", STACKS)
def test_every_workload_kind_is_read_and_groups_keep_to_one_zone(plans, project, stack):
    """The manifests' own check reads canaries' Rollouts (it skipped them) and each multi-node group's zone
    affinity: leader and workers require the zone of their own group's pods (matchLabelKeys on the group key,
    so one group never pins another to its zone)."""
    plan = plans[stack]
    manifests = render_fleet_manifests(plan, project.environment(stack).deploy)
    read = {name for name, *_ in _pods(manifests)}
    rollouts = {name for name, objects in manifests.items() if any(o["kind"] == "Rollout" for o in objects)}
    assert rollouts and rollouts <= read
    groups = [o for objects in manifests.values() for o in objects if o["kind"] == "LeaderWorkerSet"]
    for obj in groups:
        terms = _group_affinity(obj)
        assert len(terms) == 2, obj["metadata"]["name"]
        for labels, term in terms:  # it selects its own workload's pods, of its own group
            assert term["topologyKey"] == "topology.kubernetes.io/zone"
            assert term["matchLabelKeys"] == ["leaderworkerset.sigs.k8s.io/group-key"]
            assert term["labelSelector"]["matchLabels"].items() <= labels.items()
    assert groups or stack == "dev"


def _request(spec: dict, resource: str) -> float:
    """The pod's effective request, as the scheduler counts it."""
    def of(c):
        return quantity(c.get("resources", {}).get("requests", {}).get(resource, 0))
    return max(max((of(c) for c in spec.get("initContainers", [])), default=0), sum(of(c) for c in spec["containers"]))


def check_fleet_fits(plan: FleetPlan, deploy: DeploySettings) -> None:
    manifests = render_fleet_manifests(plan, deploy)
    groups = {g.instance_type: g for g in plan.node_groups}
    gpus_at_max: dict[str, int] = {}
    for name, spec, pods, size, instance_type in _pods(manifests):
        group = groups[instance_type]
        free = group.allocatable.model_copy()
        allowance = group.daemonset_allowance
        gpus = int(_request(spec, "nvidia.com/gpu"))
        slots = gpus if group.device == "gpu" else 1  # a KIND_CPU server's pod holds its whole CPU node
        share = slots / group.pod_slots
        assert _request(spec, "cpu") <= (free.cpu - allowance.cpu) * share + 1e-6, (name, group.name)
        assert _request(spec, "memory") <= (free.memory_gib - allowance.memory_gib) * share + 0.01, (name, group.name)
        assert _request(spec, "ephemeral-storage") * group.pod_slots / slots <= (
            free.ephemeral_storage_gib - allowance.ephemeral_storage_gib), (name, group.name)
        gpus_at_max[group.name] = gpus_at_max.get(group.name, 0) + pods * slots
        if size > 1:  # a multi-node replica: its group is one node group per zone, each for whole replicas
            assert group.zonal, name  # (single-node workloads sharing the group add nodes of their own)
            assert len(group.workloads) > 1 or all(z.max_size % size == 0 for z in group.zonal), name
    for group in plan.node_groups:
        assert group.max_size * group.pod_slots >= gpus_at_max.get(group.name, 0), group.name
    for objects in manifests.values():
        for budget in (o for o in objects if o["kind"] == "PodDisruptionBudget"):
            assert budget["spec"].get("maxUnavailable", 0) >= 1


FIT_MESSAGES = ("cannot schedule", "a node full of", "cannot hold the HPA max", "whole")
BIG = LlmModelSpec.model_validate({
    "name": "big", "type": "llm", "artifact": "meta-llama/Llama-3.1-405B-Instruct", "size": {"dtype": "bf16"},
    "architecture": "llama-3.1-405b", "sla": {"max_context_tokens": 8192, "peak_concurrent_sequences": 16,
                                              "p99_ttft_ms": 4000, "availability": 99.9}})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models=fleets(max_models=5), env=st.sampled_from(ENVIRONMENTS), big=st.booleans(),
       zones=st.integers(2, 3), callers=st.booleans())
def test_random_fleets_fit_their_node_groups(catalogue, models, env, big, zones, callers):
    """For random fleets and stacks: every rendered pod fits its node group's allocatable less the allowance
    at HPA max plus surge, multi-node replicas get a node group per zone, and every PDB allows an eviction;
    with callers counted too (a proxy in every Triton pod, set aside before the server is sized)."""
    env = EnvironmentSpec.model_validate({**env.model_dump(), "availability_zones": zones,
                                          "instance_families": (*env.instance_families, "p5"),
                                          "callers": ("checkout-service",) if callers else ()})
    fleet = FleetSpec(models=(*models, *((BIG,) if big else ())))
    try:
        plan = compile_fleet(fleet, env, catalogue)
    except CompileError as error:  # an SLA no allowed GPU meets, say; never a placement that cannot schedule
        assert not [i for i in error.issues if any(s in i.message for s in FIT_MESSAGES)], error
        assume(False)
    check_fleet_fits(plan, env.deploy)


def test_the_fit_check_covers_a_cpu_node_group(plans):
    """A CPU node group holds one KIND_CPU server pod per node: its allocatable is the kubelet's (c7i.xlarge:
    4 vCPU less 80 m, 8 GiB x 0.925 less 255 + 11 x 58 MiB and the 100 MiB threshold), its busiest node the
    server's pod and the allowance; a pod asking more than a node offers is a located error naming the group."""
    from modelfleet.plan.capacity.fit import check_fit

    plan = plans["prod"]
    (group,) = [g for g in plan.node_groups if g.device == "cpu"]
    assert (group.allocatable.cpu, group.allocatable.memory_gib, group.allocatable.gpus, group.allocatable.pods) == (
        3.92, round((math.floor(8 * 1024 * 0.925) - (11 * 58 + 255) - 100) / 1024, 2), 0, 58)
    server = plan.server(group.workloads[0])
    pod = server.pod
    assert group.requested.cpu == pytest.approx(pod.request("cpu_millis") / 1000 + group.daemonset_allowance.cpu)
    assert group.requested.memory_gib <= group.allocatable.memory_gib
    big = pod.model_copy(update={"containers": tuple(
        c.model_copy(update={"memory_mib": 7 * 1024}) if c.name == "triton" else c for c in pod.containers)})
    swollen = plan.model_copy(update={"triton_servers": tuple(
        s.model_copy(update={"pod": big}) if s.name == server.name else s for s in plan.triton_servers)})
    issues = check_fit(swollen, {"fraud-scorer": "models[2]"})
    assert any(i.path == "models[2]" and f"{server.name}: a pod cannot schedule on {group.name} (c7i.xlarge)" in i.message
               and "GiB of memory" in i.message for i in issues), issues


# --------------------------------------------------------------------------- docs/scheduling.md's table
SCHEDULING_DOC = Path(__file__).resolve().parent.parent / "docs" / "scheduling.md"
TABLE_START, TABLE_END = "<!-- fit-table:start -->\n", "<!-- fit-table:end -->"


def fit_table(plans: dict[str, FleetPlan]) -> str:
    """Every stack's node groups, per node: allocatable against the busiest node's requests (plan --json)."""
    rows = ["| stack | group | nodes min/desired/max | CPU alloc / req | memory GiB alloc / req | ephemeral GiB "
            "alloc / req | GPUs alloc / req | pods alloc / req |", "|---|---|---|---|---|---|---|---|"]
    for stack in ("prod", "staging", "dev"):
        for g in plans[stack].node_groups:
            a, r = g.allocatable, g.requested
            zones = f" ({len(g.zonal)} zone groups)" if g.zonal else ""
            rows.append(f"| {stack} | {g.name}{zones} | {g.min_size}/{g.desired_size}/{g.max_size} | {a.cpu:,.2f} / "
                        f"{r.cpu:,.2f} | {a.memory_gib:,.2f} / {r.memory_gib:,.2f} | {a.ephemeral_storage_gib:,.1f} / "
                        f"{r.ephemeral_storage_gib:,.1f} | {a.gpus} / {r.gpus} | {a.pods} / {r.pods} |")
    return "\n".join(rows) + "\n"


def test_the_scheduling_pages_table_is_the_plans(plans):
    """The table of docs/scheduling.md is generated from the plans (it had drifted: g5 memory 9.01, disk 56,
    no CPU group, no staging or dev); MODELFLEET_UPDATE_GOLDEN=1 rewrites it."""
    text = SCHEDULING_DOC.read_text()
    before, rest = text.split(TABLE_START, 1)
    table, after = rest.split(TABLE_END, 1)
    expected = fit_table(plans)
    if update_golden() and table != expected:
        SCHEDULING_DOC.write_text(before + TABLE_START + expected + TABLE_END + after)
        table = expected
    assert table == expected
