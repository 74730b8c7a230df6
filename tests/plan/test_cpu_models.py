"""Classic models on CPU nodes (KIND_CPU): the choice of device, the instance counts from the node's vCPUs, the
CPU types a measured profile applies to, and the located errors. Pure: specs in, plans or issues out."""

from __future__ import annotations

import textwrap

import pytest

from modelfleet.errors import CompileError, SpecError
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.triton.cpu_placement import place_on_cpu, usable_cores
from modelfleet.plan.hardware.kubelet import kube_reserved_cpu_millis
from modelfleet.render.fleet import render_fleet
from modelfleet.render.triton import parse_config
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.load import parse_fleet_text

PROD = EnvironmentSpec(name="prod", region="us-east-1", instance_families=("g5", "g6", "g6e", "c7i", "m7i", "c6i"))
G5 = EnvironmentSpec(name="prod", region="us-east-1", instance_families=("g5", "c7i", "m7i"))  # one GPU type
GPU_ONLY = EnvironmentSpec(name="prod", region="us-east-1", instance_families=("g5", "g6", "g6e"))
DEV = EnvironmentSpec.model_validate({"name": "dev", "region": "us-east-1", "capacity_type": "spot",
                                      "instance_families": ("g5", "c7i"), "replicas": {"single_replica": True}})

SCORER = """
  - name: {name}
    type: tabular
    framework: {framework}
    artifact: s3://bucket/{name}
    size: {{memory_gib: 0.3}}
    inputs: [{{name: features, dtype: fp32, dims: [64]}}]
    outputs: [{{name: score, dtype: fp32, dims: [1]}}]
    sla: {{p99_latency_ms: 20, peak_rps: {rps}, availability: 99.95}}
    profile:
      rps_per_instance: 20000
      measured_on: a10g
      compute_ms: 3
      cpu: {{rps_per_instance: 5000, compute_ms: 5, measured_on: {family}, vcpu_per_instance: {vcpu}}}{extra}
"""
EMBEDDER = """
  - name: embedder
    type: embedding
    framework: onnx
    artifact: s3://bucket/embedder
    size: {memory_gib: 0.5}
    inputs: [{name: ids, dtype: int64, dims: [-1]}]
    outputs: [{name: vector, dtype: fp32, dims: [384]}]
    sla: {p99_latency_ms: 50, peak_rps: EMBEDDER_RPS, availability: 99.9}
    profile: {rps_per_instance: 2500, measured_on: a10g, compute_ms: 12}
"""


def fleet(*scorers: dict, embedder: bool = True, embedder_rps: int = 2600) -> str:
    defaults = {"name": "scorer", "framework": "onnx", "rps": 12000, "family": "c7i", "vcpu": 1, "extra": ""}
    head = EMBEDDER.replace("EMBEDDER_RPS", str(embedder_rps)) if embedder else ""
    return "models:" + head + "".join(SCORER.format(**{**defaults, **s}) for s in scorers)


def compile_text(text: str, env: EnvironmentSpec = PROD):
    from modelfleet.plan.hardware.instances import load_instance_catalogue

    return compile_fleet(parse_fleet_text(text), env, load_instance_catalogue())


def test_a_measured_tabular_model_moves_to_a_cpu_when_that_is_cheaper():
    """The embedder's 2,600 req/s need a GPU of their own (1.49 GPUs of compute): the scorer shares no spare
    GPU, and on the GPUs it would add nodes of its own. On c7i.xlarge nodes its 12,000 req/s are 12,000 /
    (5,000 x 0.7) = 3.43 instances, 2 per node over the 2 replicas its 99.95% availability asks:
    2 x (0.1785 + 200 GiB x 0.08 / 730) = 0.40 USD/h."""
    plan = compile_text(fleet({}))
    scorer = plan.model("scorer")
    assert (scorer.device, scorer.instance_type, scorer.replicas, scorer.instance_count) == ("cpu", "c7i.xlarge", 2, 2)
    assert (scorer.gpus_per_replica, scorer.gpu_share, scorer.cpu_cores) == (0, 0.0, 2)
    (choice,) = [d for d in scorer.decisions if d.choice == "KIND_CPU on a CPU node"]
    gpu = scorer.gpu_placement_usd_per_hour
    assert gpu > 0.40 and f"on the CPU nodes it adds 0.40 USD/h to the stack, on the GPUs {gpu:.2f} USD/h" in choice.reason
    server = plan.server(scorer.server)
    assert (server.name, server.device, server.node_group) == ("triton-c7i-xlarge", "cpu", "cpu-c7i-xlarge-od")
    group = plan.node_group(server.node_group)
    assert (group.device, group.gpus_per_node, group.pod_slots, group.min_size, group.desired_size) == ("cpu", 0, 1, 2, 2)
    assert plan.model("embedder").device == "gpu"


def test_a_model_riding_free_on_a_gpu_stays_there():
    """Beside an embedder at 1,000 req/s (0.57 GPUs of compute on 2 replicas for its availability), the scorer's
    1,200 req/s (0.09) fit the g5 GPUs already paid for: they add nothing there, and 2 CPU nodes would add
    0.40. (With every GPU family allowed, the embedder alone runs on two cheaper L4 nodes, where it needs a GPU
    of its own: the scorer beside it would move both to two g5 nodes, 0.40 USD/h dearer.)"""
    scorer = compile_text(fleet({"rps": 1200}, embedder_rps=1000), G5).model("scorer")
    assert scorer.device == "gpu" and scorer.gpu_placement_usd_per_hour is None
    (choice,) = [d for d in scorer.decisions if d.choice == "GPU"]
    assert "on the CPU nodes it adds 0.40 USD/h to the stack, on the GPUs 0.00 USD/h" in choice.reason
    assert "it stays on the GPU" in choice.reason


def test_device_cpu_is_kept_and_the_plan_says_what_the_gpus_would_cost():
    """Written device: cpu is placed there even where the GPUs would cost nothing more; the plan says so."""
    scorer = compile_text(fleet({"rps": 1200, "extra": "\n    device: cpu"}, embedder_rps=1000), G5).model("scorer")
    assert scorer.device == "cpu" and scorer.gpu_placement_usd_per_hour == 0.0
    assert any(d.reason == "device: cpu, as models.yaml says; on the GPUs it would add 0.00 USD/h (ranking prices)"
               for d in scorer.decisions)


def test_the_kind_cpu_count_comes_from_the_nodes_vcpus():
    """A c7i.2xlarge offers 8,000 - 90 m of CPU (kube-reserved: 60 + 10 + 5 x 2 + 2.5 x 4); less the 0.5-core
    DaemonSet allowance and Triton's own 0.5 core: 6 whole vCPUs, 3 instances of 2 vCPUs each."""
    from modelfleet.plan.hardware.instances import load_instance_catalogue

    catalogue = load_instance_catalogue()
    assert kube_reserved_cpu_millis(8) == 90
    assert [usable_cores(catalogue.cpu_instances[t], PROD) for t in ("c7i.large", "c7i.xlarge", "c7i.2xlarge")] == [0, 2, 6]
    spec = parse_fleet_text(fleet({"vcpu": 2, "rps": 500}, embedder=False)).models[0]
    placed = place_on_cpu([spec], [], PROD, catalogue, catalogue.cpu_instances["c7i.2xlarge"])
    (server,) = placed.servers
    # 500 / (5,000 x 0.7) = 0.14 instances for the load; the 6 cores hold 3 of 2 vCPUs: all become instances
    assert (server.replicas, server.counts["scorer"], server.cores) == (2, 3, 6)
    on_large = place_on_cpu([spec], [], PROD, catalogue, catalogue.cpu_instances["c7i.large"])
    assert on_large.reason == ("scorer needs 2 vCPU(s) per replica for the fewest instances, more than the 0 a "
                               "c7i.large server pod has")


def test_the_config_pins_each_instances_threads():
    plan = compile_text(fleet({"vcpu": 2}))
    scorer = plan.model("scorer")
    config = parse_config(render_fleet(plan)[f"triton/{scorer.server}/scorer/config.pbtxt"].decode())
    assert [(g.kind, g.count) for g in config.instance_group] == [(2, scorer.instance_count)]  # KIND_CPU
    assert config.parameters["intra_op_thread_count"].string_value == "2"
    torch = compile_text(fleet({"framework": "pytorch", "vcpu": 2}))
    pt = torch.model("scorer")
    config = parse_config(render_fleet(torch)[f"triton/{pt.server}/scorer/config.pbtxt"].decode())
    assert config.parameters["INTRA_OP_THREAD_COUNT"].string_value == "2" and pt.device == "cpu"


def test_figures_measured_on_one_processor_do_not_apply_to_another():
    """c6i is Ice Lake, c7i and m7i Sapphire Rapids: figures measured on a c6i rule out the *7i types."""
    plan = compile_text(fleet({"family": "c6i"}))
    scorer = plan.model("scorer")
    assert scorer.device == "cpu" and scorer.instance_type.startswith("c6i.")
    rejected = {a.option: a.reason for a in plan.server(scorer.server).decision.rejected}
    assert rejected["c7i.xlarge"] == ("scorer: its CPU figures were measured on c6i (Ice Lake) and do not apply to a "
                                      "Sapphire Rapids")


def test_device_cpu_without_a_cpu_family_is_a_located_error():
    with pytest.raises(CompileError) as caught:
        compile_text(fleet({"extra": "\n    device: cpu"}), GPU_ONLY)
    (issue,) = caught.value.issues
    assert issue.path == "models[1].device"
    assert "allows no CPU instance family" in issue.message and "add a CPU family (c6i, c7i, m6i, m7i, r7i)" in issue.fix


def test_device_cpu_is_refused_for_frameworks_whose_threads_cannot_be_set():
    with pytest.raises(SpecError) as caught:
        parse_fleet_text(fleet({"framework": "tensorrt", "extra": "\n    device: cpu"}))
    (issue,) = caught.value.issues
    assert issue.path == "models[1].device" and "runs on NVIDIA GPUs only" in issue.message


def test_an_unknown_measuring_family_is_located():
    with pytest.raises(CompileError) as caught:
        compile_text(fleet({"family": "c7x", "extra": "\n    device: cpu"}))
    (issue,) = caught.value.issues
    assert issue.path == "models[1].device"
    assert "profile.cpu.measured_on 'c7x' is not a CPU family of the instance catalogue" in issue.message


def test_a_single_replica_stack_fills_one_node_and_says_what_it_cannot_serve():
    """dev runs one replica: the scorer's 3.43 busy instances do not fit one c7i.xlarge's 2 cores, so the
    plan warns what the replica serves (the cheapest type wins: more replicas are not an option there)."""
    plan = compile_text(fleet({"extra": "\n    device: cpu"}, embedder=False), DEV)
    scorer = plan.model("scorer")
    assert (scorer.replicas, scorer.instance_type, scorer.instance_count) == (1, "c7i.xlarge", 2)
    assert any(w.model == "scorer" and "serve about" in w.message and "server pods" in w.message for w in plan.warnings)


def test_a_pipeline_of_cpu_steps_runs_on_their_server():
    pre = SCORER.format(name="pre", framework="python", rps=100, family="c7i", vcpu=1,
                        extra="\n    device: cpu\n    handles_cancellation: true").replace(
        "outputs: [{name: score, dtype: fp32, dims: [1]}]", "outputs: [{name: features_out, dtype: fp32, dims: [64]}]")
    post = SCORER.format(name="post", framework="onnx", rps=100, family="c7i", vcpu=1, extra="\n    device: cpu")
    text = textwrap.dedent("""\
        pipelines:
          - name: scoring
            inputs: [{name: raw, dtype: fp32, dims: [64]}]
            outputs: [{name: score, dtype: fp32, dims: [1], from: post.score}]
            steps:
              - model: pre
                inputs: {features: raw}
              - model: post
                inputs: {features: pre.features_out}
            sla: {p99_latency_ms: 60, peak_rps: 200}
        """) + "models:" + pre + post
    plan = compile_text(text)
    (pipeline,) = plan.pipelines
    assert pipeline.server == plan.model("pre").server == plan.model("post").server
    assert plan.server(pipeline.server).device == "cpu"
    split = pipeline.decisions[0]
    assert "Sapphire Rapids CPU" in split.reason and sum(s.budget_ms for s in pipeline.steps) == pytest.approx(60)


# The property's falsifying example (test_scheduling_fit.py, dev profile, e.g. --hypothesis-seed=9): one 2 GiB
# KIND_CPU model whose 141 req/s keep 141 / (200 x 0.7) = 1.007 instances busy.
HEAVY = """models:
  - name: m0
    type: tabular
    framework: onnx
    device: cpu
    artifact: s3://bucket/triton/m0
    size: {memory_gib: 2.0}
    inputs: [{name: x, dtype: fp32, dims: [16]}]
    outputs: [{name: y, dtype: fp32, dims: [1]}]
    sla: {p99_latency_ms: 20, peak_rps: 141, availability: 99.0}
    profile:
      rps_per_instance: 100
      measured_on: a10g
      compute_ms: 5
      cpu: {rps_per_instance: 200, compute_ms: 5, measured_on: c7i, vcpu_per_instance: 1}
"""


def test_a_cpu_servers_replicas_hold_its_instances_host_ram():
    """A c7i.xlarge server pod gets 5.43 GiB of host RAM (6.43 allocatable less the 1 GiB allowance). One
    replica would run the load's 2 instances of 2 GiB each beside Triton's 1 GiB and a 2 GiB load-time copy:
    7 GiB, which the placement accepted (it sized the replicas by cores alone and checked RAM only for the
    floors) and the fit check then refused, failing the compile. Replicas are now the fewest whose instances
    fit the node's cores and its RAM: 2 replicas of 1 instance, 5 GiB each and half the 0.43 GiB left as a
    response cache (220 MiB): 5.21 GiB; the pod requests what the plan counted, within the node's offer."""
    from modelfleet.plan.capacity.fit import free_per_node, pod_resources
    from modelfleet.plan.hardware.instances import load_instance_catalogue
    from modelfleet.plan.hardware.kubelet import memory_allocatable_mib
    from modelfleet.plan.triton.cpu_placement import pod_ram_gib

    catalogue = load_instance_catalogue()
    spec = parse_fleet_text(HEAVY).models[0]
    for instance in catalogue.cpu_in_families(PROD.instance_families):
        placed = place_on_cpu([spec], [], PROD, catalogue, instance)
        for server in getattr(placed, "servers", ()):
            assert server.memory_request_gib <= pod_ram_gib(instance, PROD) + 1e-9, (instance.name, server)
    xlarge = catalogue.cpu_instances["c7i.xlarge"]
    (server,) = place_on_cpu([spec], [], PROD, catalogue, xlarge).servers
    assert (server.replicas, server.counts["m0"], server.cache_size_bytes // 2**20) == (2, 1, 220)
    assert server.memory_request_gib == 5.21 <= pod_ram_gib(xlarge, PROD)
    plan = compile_text(HEAVY)  # raised CompileError: "requests 7 GiB of memory > 5.43 free per node"
    for s in plan.triton_servers:
        group = plan.node_group(s.node_group)
        (main,) = [c for c in s.pod.containers if not c.init]
        kept_mib = group.daemonset_allowance.memory_gib * 1024
        instance = catalogue.cpu_instances[s.instance_type]
        assert main.memory_mib <= memory_allocatable_mib(instance) - kept_mib, (s.name, main.memory_mib)
        assert pod_resources(s.pod, 0).memory_gib <= free_per_node(group).memory_gib
