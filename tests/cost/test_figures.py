"""Hand-checked monthly costs of the example fleet, with the arithmetic written out.

Prices: on-demand us-east-1 USD per node-hour, from ../shared/REFERENCE.md (AWS Pricing API, 2026-07-20),
as shipped in modelfleet/data/instances.yaml. A month is 730 hours. Spot (dev) is the table's dated us-east-1
spot figure of each type (instances.yaml: the dearest us-east-1 zone's price in SkyPilot's AWS catalogue,
modelfleet/data/sources/spot-us-east-1-skypilot.csv).

Each node also pays for its EBS gp3 volume a month (us-east-1: 0.08 USD per GiB, 0.005 per IOPS above 3,000,
0.04 per MiB/s above 125; the same on spot): the example's nodes have 200 GiB at the included 3,000 IOPS and
125 MiB/s = 16.00 USD. Their pods write to the instance store (every catalogue GPU type has NVMe), so the root
volume is the stack's floor for the OS; the 405B's p5 nodes had 900 GiB at 1,000 MiB/s (112.00 USD) before.

An LLM's cost per million tokens divides its cost by what its replicas generate at peak: the plan's predicted
output tokens/s per replica (plan/llm/speed/load.py), not a per-sequence default.
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType

import pytest
import yaml

from modelfleet.cost.fleet import compute_fleet_cost, estimate_llm_loads
from modelfleet.errors import SpecError
from modelfleet.plan.hardware.instances import PriceSource, catalogue_from_data, load_instance_catalogue
from modelfleet.plan.hardware.node_price import SPOT_DATED, SPOT_ESTIMATED, estimate_node_price
from modelfleet.project import Project
from modelfleet.spec.environment import EnvironmentSpec
from tests.conftest import ROOT

PRICE = {"g4dn.xlarge": 0.526, "g5.xlarge": 1.006, "g6e.xlarge": 1.861, "g6e.12xlarge": 10.49264,
         "p4d.24xlarge": 21.957642, "p5.48xlarge": 55.04, "c7i.xlarge": 0.1785}
H = 730
EBS = {"g4dn.xlarge": 16.0, "g5.xlarge": 16.0, "g6e.xlarge": 16.0, "g6e.12xlarge": 16.0, "p4d.24xlarge": 16.0,
       "p5.48xlarge": 16.0, "c7i.xlarge": 16.0}
# The CPU node group of fraud-scorer (KIND_CPU, plan/triton/cpu_placement.py): 2 / 2 / 4 c7i.xlarge, 2 x (0.1785 x 730 + 16)
# = 292.61 a month at min and desired, 585.22 at max (3 replicas at the HPA's max, 1 more for the rollout surge).
CPU_GROUP = (292.61, 292.61, 585.22)


def per_node(instance_type: str, ratio: float = 1.0) -> float:
    """One node for a month: instance-hours (x the spot ratio) and its volume."""
    return PRICE[instance_type] * ratio * H + EBS[instance_type]


def test_the_price_table_is_the_one_the_arithmetic_uses(catalogue):
    for name, usd_per_hour in PRICE.items():
        assert catalogue.node_type(name).price("us-east-1") == usd_per_hour
    assert catalogue.eks_usd_per_cluster_hour == 0.10
    assert catalogue.price_sources["us-east-1"]["on-demand"].as_of == "2026-07-20"
    gp3 = catalogue.ebs_gp3["us-east-1"]
    assert (gp3.usd_per_gib_month, gp3.usd_per_iops_month, gp3.usd_per_mibps_month) == (0.08, 0.005, 0.04)


@pytest.fixture(scope="module")
def costed():
    project = Project(root=str(ROOT))
    return {stack: project.costed(stack) for stack in ("dev", "staging", "prod")}


def _group(cost, instance_type):
    return next(g for g in cost.node_groups if g.instance_type == instance_type)


def test_prod_node_groups(costed):
    cost = costed["prod"].cost
    # instance type: (min, desired, max nodes) from `plan --stack prod`; max holds the HPA's max plus one
    # replica's rollout surge of each workload (the 405B: 3 replicas + 1, 2 nodes each; the 70B: ceil(3 x 1.5)
    # = 5 replicas + 1 of one p4d each; the 8B: ceil(4 x 1.5) = 6 + 1 on g6e.xlarge: its declared Poisson
    # traffic with lognormal lengths needs 4 replicas for the p99 TPOT, simulated)
    expected = {"g5.xlarge": (2, 2, 4), "g6e.xlarge": (2, 4, 7), "p4d.24xlarge": (2, 3, 6), "p5.48xlarge": (4, 4, 8),
                "c7i.xlarge": (2, 2, 4)}
    for instance_type, nodes in expected.items():
        group = _group(cost, instance_type)
        assert group.nodes == nodes
        assert group.usd_per_node_hour == PRICE[instance_type]
        assert group.volume_usd_per_node_month == pytest.approx(EBS[instance_type])
        for level, count in zip(("min", "desired", "max"), nodes):
            assert group.monthly_usd.at(level) == pytest.approx(count * per_node(instance_type))
    # g5.xlarge 2 x (1.006 x 730 + 16) = 1,500.76; g6e.xlarge 4 x (1.861 x 730 + 16) = 5,498.12;
    # p4d.24xlarge 3 x (21.957642 x 730 + 16) = 48,135.23598; p5.48xlarge 4 x (55.04 x 730 + 16) = 160,780.80:
    # its pods write to the 8 NVMe disks, so the root volume holds the OS only
    assert _group(cost, "p4d.24xlarge").monthly_usd.desired == pytest.approx(48_135.23598)
    assert _group(cost, "p5.48xlarge").monthly_usd.max == pytest.approx(8 * 40_195.20)  # 321,561.60
    assert _group(cost, "p5.48xlarge").volume == "200 GiB gp3 at 3000 IOPS, 125 MiB/s"
    assert _group(cost, "g5.xlarge").volume == "200 GiB gp3 at 3000 IOPS, 125 MiB/s"


def test_prod_total_at_min_desired_max(costed):
    total = costed["prod"].cost.monthly_usd
    assert total.desired == pytest.approx(1_500.76 + 5_498.12 + 48_135.23598 + 160_780.80 + 292.61)  # 216,207.52598
    assert total.min == pytest.approx(1_500.76 + 2_749.06 + 32_090.15732 + 160_780.80 + 292.61)  # 197,413.38732
    assert total.max == pytest.approx(3_001.52 + 9_621.71 + 96_270.47196 + 321_561.60 + 585.22)  # 431,040.52196
    # of which EBS at desired: 15 nodes x 16.00 = 240.00 (0.1%)
    assert sum(g.nodes[1] * g.volume_usd_per_node_month for g in costed["prod"].cost.node_groups) == 240.0
    assert costed["prod"].cost.control_plane_monthly_usd is None  # the stack joins an existing cluster


def test_llms_own_their_node_groups_and_cost_per_million_tokens(costed):
    plan, cost = costed["prod"].plan, costed["prod"].cost
    llama70 = cost.model("llama-3-3-70b-instruct")
    assert llama70.gpus == (16, 24, 40)  # 2 / 3 / 5 replicas x tp=8
    assert llama70.monthly_usd.desired == pytest.approx(3 * per_node("p4d.24xlarge"))  # 48,135.23598
    # the replicas' predicted output at peak: 3 x the plan's tokens/s per replica, on 48,135.24 / 730 USD/h
    estimates = plan.model("llama-3-3-70b-instruct").estimates
    served = 3 * estimates.output_tokens_per_s_per_replica
    assert llama70.unit_cost.metric == "usd_per_million_tokens"
    assert llama70.unit_cost.value == pytest.approx(48_135.23598 / 730 / (served * 3600) * 1e6)
    assert f"{served:,.0f} tokens/s sustained" in llama70.unit_cost.assumption
    assert estimates.source in llama70.unit_cost.assumption and llama70.unit_cost.shortfall is None
    assert llama70.estimates == estimates  # shown beside the cost
    llama405 = cost.model("llama-3-1-405b-instruct")  # 2 replicas x 2 nodes of 8 H100
    assert llama405.monthly_usd.desired == pytest.approx(4 * per_node("p5.48xlarge"))  # 160,780.80
    served = 2 * plan.model("llama-3-1-405b-instruct").estimates.output_tokens_per_s_per_replica
    assert llama405.unit_cost.value == pytest.approx(160_780.80 / 730 / (served * 3600) * 1e6)


def test_a_per_sequence_decode_rate_no_longer_prices_tokens(tmp_path):
    """profile.output_tokens_per_s_per_sequence was the decode speed the cost assumed (30 by default); the
    planner now predicts it, so the figure is kept out of the cost and the plan says so."""
    import shutil
    old = "    architecture: llama-3.3-70b\n"
    text = (ROOT / "models.yaml").read_text()
    assert old in text
    (tmp_path / "models.yaml").write_text(text.replace(old, old + "    profile: {output_tokens_per_s_per_sequence: 45}\n"))
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    costed = Project(root=str(tmp_path)).costed("prod")
    before = Project(root=str(ROOT)).costed("prod").cost.model("llama-3-3-70b-instruct").unit_cost
    assert costed.cost.model("llama-3-3-70b-instruct").unit_cost == before
    assert any("output_tokens_per_s_per_sequence" in w.message for w in costed.plan.warnings)


def test_shared_triton_gpus_are_split_by_gpu_share(costed):
    plan, cost = costed["prod"].plan, costed["prod"].cost
    # triton-g5-xlarge holds the four GPU classic models: 2 replicas x 1 GPU, the 2 g5.xlarge GPUs in use.
    # text-embedder: 800 / (2,500 x 0.7) = 0.4571 GPUs of compute over 2 replicas = 0.2286 of each;
    # session-recommender: 200 / (3,000 x 2 instances x 0.7) = 0.0476 over 2 = 0.0238; the preprocessor and the
    # classifier carry 100 req/s of their own + 200 of the image-classification pipeline (300 / (700 x 0.7) / 2).
    shares = {"image-preprocessor": 0.3061, "resnet50-classifier": 0.2381, "session-recommender": 0.0238,
              "text-embedder": 0.2286}  # sum 0.7966
    assert {name: plan.model(name).gpu_share for name in shares} == shares
    assert plan.server("triton-g5-xlarge").models == tuple(sorted(shares))
    server_usd = 2 * per_node("g5.xlarge")  # 1,500.76
    embedder = cost.model("text-embedder")
    assert embedder.monthly_usd.desired == pytest.approx(server_usd * 0.2286 / 0.7966)  # 430.67
    assert cost.model("image-preprocessor").monthly_usd.desired == pytest.approx(server_usd * 0.3061 / 0.7966)
    assert "gpu_share 0.2286 of 0.7966" in embedder.attribution
    # 800 inferences/s = 2,880,000 per hour; 430.67 / 730 USD per hour
    assert embedder.unit_cost.value == pytest.approx(server_usd * 0.2286 / 0.7966 / 730 / 2_880_000 * 1000)


def test_the_cpu_model_pays_for_its_nodes_and_shows_its_saving(costed):
    """fraud-scorer on KIND_CPU (the compiler's choice in prod): its server holds the 2 c7i.xlarge nodes of its
    CPU group, alone. On the GPUs it would have added a third g5.xlarge node to triton-g5-xlarge (its 12,000
    req/s are 12,000 / (20,000 x 0.7) = 0.857 GPUs of compute, 0.7966 x 2 + 0.857 > 2): the plan's
    gpu_placement_usd_per_hour = 1.006 + 200 x 0.08 / 730 = 1.02792 USD/h, 750.37 a month."""
    plan, cost = costed["prod"].plan, costed["prod"].cost
    fraud = cost.model("fraud-scorer")
    assert (fraud.device, fraud.instance_type, fraud.gpus) == ("cpu", "c7i.xlarge", (0, 0, 0))
    assert (fraud.monthly_usd.min, fraud.monthly_usd.desired, fraud.monthly_usd.max) == pytest.approx(CPU_GROUP)
    assert "holds 2 of the 2 nodes used in cpu-c7i-xlarge-od; alone on it" in fraud.attribution
    assert plan.model("fraud-scorer").gpu_placement_usd_per_hour == pytest.approx(1.006 + 16 / 730, abs=1e-4)
    assert fraud.gpu_alternative_monthly_usd == pytest.approx(per_node("g5.xlarge"), abs=0.1)  # 750.38
    assert fraud.saving_monthly_usd == pytest.approx(per_node("g5.xlarge") - 292.61, abs=0.1)  # 457.77


def test_model_costs_add_up_to_the_node_groups(costed):
    for stack, item in costed.items():
        groups = sum(g.monthly_usd.desired for g in item.cost.node_groups)
        assert sum(m.monthly_usd.desired for m in item.cost.models) == pytest.approx(groups), stack


# instances.yaml: the dearest us-east-1 zone of each (spot-us-east-1-skypilot.csv): g5.xlarge use1-az1 (zones
# 0.4246-0.4507), g6e.xlarge use1-az1 (0.9154-1.1975), g6e.12xlarge use1-az6 (3.7887-6.015)
SPOT = {"g5.xlarge": 0.4507, "g6e.xlarge": 1.1975, "g6e.12xlarge": 6.015}


def test_dev_is_spot_at_the_tables_dated_prices(costed):
    cost = costed["dev"].cost
    assert _group(cost, "g5.xlarge").usd_per_node_hour == SPOT["g5.xlarge"]
    assert _group(cost, "g5.xlarge").price_basis == "spot (dated table)"
    # g5.xlarge: the two Triton servers, 2 x (0.4507 x 730 + 16) = 690.022; g6e.xlarge: the 8B's replica (its
    # declared prompts' p99, 7,000 tokens, prefill too slowly on an A10G for its p99 TTFT), 1.1975 x 730 + 16 =
    # 890.175; g6e.12xlarge: the 70B, 6.015 x 730 + 16 = 4,406.95 (EBS is not discounted). The lock keeps both
    # LLMs where they are: the fresh optimum, g6e.2xlarge and g6e.24xlarge (dearer zones cheaper), saves 4.4%,
    # under the stack's 10% re-pack threshold.
    assert cost.monthly_usd.desired == pytest.approx(2 * (SPOT["g5.xlarge"] * H + 16) + SPOT["g6e.xlarge"] * H + 16
                                                     + SPOT["g6e.12xlarge"] * H + 16)
    assert cost.monthly_usd.desired == pytest.approx(5_987.15, abs=0.005)
    assert not any("ASSUMED" in line for line in cost.price_basis)
    # the range: every node on the cheapest allowed type's spot up to every one on-demand
    assert _group(cost, "g5.xlarge").monthly_range_usd == pytest.approx((690.022, 2 * per_node("g5.xlarge")))
    # one replica serves what it can of the 4 requests/s (1,200 output tokens/s) at peak, at the plan's tokens/s
    llama8 = cost.model("llama-3-1-8b-instruct")
    model = costed["dev"].plan.model("llama-3-1-8b-instruct")
    served = model.estimates.output_tokens_per_s_per_replica
    assert llama8.unit_cost.value == pytest.approx((SPOT["g6e.xlarge"] + 16 / 730) / (served * 3600) * 1e6)
    e = model.estimates  # the single replica misses its SLA, and the unit cost says so first
    assert llama8.unit_cost.shortfall == (f"misses the SLA: 1 replica(s) at peak, p99 TTFT {e.ttft_p99_ms:,.0f} ms (95% "
                                          f"bound {e.ttft_p99_bound_ms:,.0f}) against 1,500 ms")
    assert cost.pricing == "spot, dated table"
    assert any(line.startswith("spot us-east-1: SkyPilot's AWS catalogue (skypilot-org/skypilot-catalog@00148f2af367")
               and line.endswith("as of 2026-11-28; types without a dated price unknown") for line in cost.price_basis)


def shipped_table() -> dict:
    return yaml.safe_load((ROOT / "modelfleet" / "data" / "instances.yaml").read_text())


def test_the_shipped_spot_figures_are_dated_and_a_table_marked_estimated_says_so():
    """The shipped us-east-1 spot figures are dated prices (SkyPilot's catalogue of EC2's spot price history):
    no mark, every spot price is "dated table". The same figures in a table that marks them `estimated: true`
    (figures nobody published or measured) are called an estimate wherever they are used."""
    env = EnvironmentSpec(name="dev", region="us-east-1", capacity_type="spot")
    catalogue, data = load_instance_catalogue(), shipped_table()
    assert not catalogue.price_sources["us-east-1"]["spot"].estimated
    for instance in (*catalogue.instances.values(), *catalogue.cpu_instances.values()):
        if instance.spot_price("us-east-1") is not None:  # p5.4xlarge: no us-east-1 zone lists a spot price
            assert estimate_node_price(instance, "us-east-1", "spot", env)[1] == SPOT_DATED, instance.name
    assert catalogue.instances["p5.4xlarge"].spot_price("us-east-1") is None
    data["prices"]["us-east-1"]["spot"]["estimated"] = True
    estimated = catalogue_from_data(data)
    assert estimated.instances["g5.xlarge"].spot_estimated == {"us-east-1"}
    assert estimated.cpu_instances["c7i.xlarge"].spot_estimated == {"us-east-1"}
    assert estimate_node_price(estimated.instances["g5.xlarge"], "us-east-1", "spot", env) == (0.4507, SPOT_ESTIMATED)


def test_a_spot_mark_that_is_not_true_or_false_is_a_located_error(tmp_path):
    data = shipped_table()
    data["prices"]["us-east-1"]["spot"]["estimated"] = "yes"
    path = tmp_path / "prices.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as caught:
        load_instance_catalogue(str(path))
    (issue,) = caught.value.issues
    assert (issue.file, issue.path) == (str(path), "prices.us-east-1.spot.estimated")
    assert "true or false" in issue.message and "estimated: true" in issue.fix


def test_a_stated_ratio_prices_only_the_types_without_a_dated_spot_price(project, catalogue):
    """A table with no spot figure for g5.xlarge and a stack that states an assumption: that type is priced at the
    ratio (and the preview says ASSUMED), the others at their dated figures."""
    dated = catalogue.instances  # the shipped spot figures are dated
    table = dataclasses.replace(catalogue, instances=MappingProxyType({
        **dated, "g5.xlarge": dataclasses.replace(dated["g5.xlarge"], spot_usd_per_hour=MappingProxyType({}))}),
        price_sources=MappingProxyType({"us-east-1": MappingProxyType({
            **catalogue.price_sources["us-east-1"], "spot": PriceSource("2026-08-01", "EC2 spot history")})}))
    env = project.environment("dev")
    env = env.model_copy(update={"cost": env.cost.model_copy(update={"spot_price_ratio": 0.5})})
    cost = compute_fleet_cost(project.plan("dev"), table, env, estimate_llm_loads(project.fleet(), "dev"))
    assert _group(cost, "g5.xlarge").usd_per_node_hour == pytest.approx(1.006 * 0.5)
    assert _group(cost, "g5.xlarge").price_basis == "spot assumed at 50% of on-demand 1.006"
    assert _group(cost, "g6e.12xlarge").usd_per_node_hour == SPOT["g6e.12xlarge"]  # dated
    assert cost.pricing == "spot, assumed 50% of on-demand for 1 of 3 node groups"
    assert any("EC2 spot history, as of 2026-08-01; types without a dated price ASSUMED at 50%" in line
               for line in cost.price_basis)
    without = compute_fleet_cost(project.plan("dev"), table, project.environment("dev"), {})
    assert _group(without, "g5.xlarge").usd_per_node_hour is None and without.monthly_usd is None  # never guessed
    marked = {n: dataclasses.replace(i, spot_estimated=frozenset({"us-east-1"})) for n, i in dated.items()}
    mixed = dataclasses.replace(catalogue, instances=MappingProxyType({  # the others at a table's marked estimates
        **marked, "g5.xlarge": dataclasses.replace(marked["g5.xlarge"], spot_usd_per_hour=MappingProxyType({}))}))
    assert compute_fleet_cost(project.plan("dev"), mixed, env, {}).pricing == (
        "spot, assumed 50% of on-demand for 1 of 3 node groups; the rest from the ESTIMATED table")


def _creating(project, stack: str, **cluster):
    env = project.environment(stack)
    return type(env).model_validate({**env.model_dump(), "cluster": {"create": True, **cluster}})


def test_a_created_cluster_adds_its_control_plane_and_system_nodes(project, catalogue):
    """The system node group is what modelfleet/deploy creates: 2-2-4 on-demand m7i.large (the stack's
    cluster.systemInstanceType default). m7i.large, us-east-1, on-demand Linux: 0.1008 USD/h (AWS Pricing API
    as published in Karpenter's generated price table, 2026-01-19; AWS's m7i list price, unchanged since launch)."""
    env = _creating(project, "prod")
    cost = compute_fleet_cost(project.plan("prod"), catalogue, env, estimate_llm_loads(project.fleet(), "prod"))
    assert cost.control_plane_monthly_usd == pytest.approx(0.10 * 730)  # 73.00
    system = cost.system_nodes
    assert (system.name, system.instance_type, system.capacity_type, system.nodes) == (
        "system", "m7i.large", "on-demand", (2, 2, 4))
    assert system.usd_per_node_hour == 0.1008
    assert system.volume == "50 GiB gp3 at 3000 IOPS, 125 MiB/s" and system.volume_usd_per_node_month == 4.0
    # 2 x (0.1008 x 730 + 50 x 0.08) = 155.168 at min and desired, 4 x 77.584 = 310.336 at max
    assert (system.monthly_usd.min, system.monthly_usd.desired, system.monthly_usd.max) == (
        pytest.approx(155.168), pytest.approx(155.168), pytest.approx(310.336))
    assert cost.monthly_usd.desired == pytest.approx(216_207.52598 + 73.0 + 155.168)  # 216,435.69398
    assert cost.monthly_usd.min == pytest.approx(197_413.38732 + 73.0 + 155.168)  # 197,641.55532
    assert cost.monthly_usd.max == pytest.approx(431_040.52196 + 73.0 + 310.336)  # 431,423.85796
    assert "system nodes us-east-1 (on-demand): AWS Pricing API (AmazonEC2, Linux, Shared, On-Demand), via " \
           "Karpenter's generated price table, as of 2026-01-19" in cost.price_basis
    # models pay for their GPUs only: the cluster's own costs are the environment's
    assert sum(m.monthly_usd.desired for m in cost.models) == pytest.approx(216_207.52598)


def test_the_priced_system_nodes_are_the_ones_deploy_creates(project):
    from modelfleet.cost.fleet import estimate_system_nodes
    from modelfleet.deploy.node_groups import system_node_group
    env = _creating(project, "prod", systemInstanceType="m6i.xlarge")
    created, priced = system_node_group(env, ()), estimate_system_nodes(project.catalogue(), env)
    assert (created.instance_type, created.capacity_type) == (priced.instance_type, "ON_DEMAND")
    assert (created.scaling.min_size, created.scaling.desired_size, created.scaling.max_size) == priced.nodes
    assert priced.monthly_usd.desired == pytest.approx(2 * (0.192 * 730 + 4))  # m6i.xlarge: 288.32
    volume = created.launch_template
    assert priced.volume == f"{volume.volume_gib} GiB gp3 at {volume.iops} IOPS, {volume.throughput_mibps} MiB/s"


def test_system_nodes_are_on_demand_on_a_spot_stack(project, catalogue):
    env = _creating(project, "dev", systemInstanceType="m7i.xlarge")
    cost = compute_fleet_cost(project.plan("dev"), catalogue, env, estimate_llm_loads(project.fleet(), "dev"))
    assert cost.system_nodes.usd_per_node_hour == 0.2016  # not spot: deploy creates them ON_DEMAND
    assert cost.system_nodes.monthly_usd.desired == pytest.approx(2 * (0.2016 * 730 + 4))  # 302.336
    assert cost.monthly_usd.desired == pytest.approx(5_987.15 + 73.0 + 302.336, abs=0.005)


@pytest.mark.parametrize(("system_type", "region", "why"), [
    ("c7i.large", "us-east-1", "system nodes c7i.large: not in the price table's system_instances"),
    ("m7i.large", "eu-west-1", "system nodes m7i.large: no on-demand price for eu-west-1")])
def test_an_unpriced_system_type_is_unknown_never_guessed(project, catalogue, system_type, region, why):
    from modelfleet.plan.compiler import compile_fleet
    env = type(_creating(project, "prod")).model_validate({
        **_creating(project, "prod", systemInstanceType=system_type).model_dump(), "region": region})
    table = catalogue if region == "us-east-1" else _priced_in(catalogue, region)  # the system type not
    cost = compute_fleet_cost(compile_fleet(project.fleet(), env, table), table, env,
                              estimate_llm_loads(project.fleet(), "prod"))
    assert cost.unknown == (why,)
    assert cost.system_nodes.monthly_usd is None and cost.system_nodes.usd_per_node_hour is None
    assert cost.monthly_usd is None  # a total without them would be a guess
    assert all(g.monthly_usd is not None for g in cost.node_groups)


def test_system_types_are_never_a_models_instance(catalogue):
    """Kept out of the GPU table: the compiler's GPU choices never see them. m6i and m7i are CPU families of
    the catalogue too (KIND_CPU models, cpu_instances): those are types of their own section, priced with the
    GPU types; m5 is a system family only."""
    assert {"m5.large", "m6i.large", "m7i.large"} <= set(catalogue.system_instances)
    assert not set(catalogue.system_instances) & set(catalogue.instances)
    assert "m5" not in catalogue.families() and {"m6i", "m7i"} <= set(catalogue.cpu_families())
    assert all(i.gpus >= 1 for i in catalogue.instances.values())
    assert not {"m6i", "m7i"} & {i.family for i in catalogue.in_families(catalogue.families())}


def test_a_stack_cannot_name_a_system_family_for_models(tmp_path):
    import shutil

    from modelfleet.errors import SpecError
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    shutil.copy(ROOT / "models.yaml", tmp_path / "models.yaml")
    path = tmp_path / "stacks" / "Pulumi.dev.yaml"
    path.write_text(path.read_text().replace("modelfleet:instanceFamilies: [", "modelfleet:instanceFamilies: [m5, "))
    with pytest.raises(SpecError, match="m5"):
        Project(root=str(tmp_path)).environment("dev")


def test_a_region_without_prices_is_unknown_never_guessed(project, catalogue):
    env = type(project.environment("prod")).model_validate(
        {**project.environment("prod").model_dump(), "region": "eu-west-1"})
    from modelfleet.plan.compiler import compile_fleet
    plan = compile_fleet(project.fleet(), env, catalogue)
    cost = compute_fleet_cost(plan, catalogue, env, estimate_llm_loads(project.fleet(), "prod"))
    assert cost.monthly_usd is None
    assert all(g.monthly_usd is None and g.usd_per_node_hour is None for g in cost.node_groups)
    assert all(m.monthly_usd is None and m.unit_cost is None for m in cost.models)
    assert "p5.48xlarge: no on-demand price for eu-west-1" in cost.unknown
    assert cost.price_basis == ("on-demand eu-west-1: no dated prices in the table",
                                "EBS gp3 eu-west-1: no dated prices in the table")


def _priced_in(catalogue, region: str, ebs: bool = True):
    """The table with every GPU and CPU type (and, with ``ebs``, gp3) priced in ``region`` as in us-east-1."""
    return dataclasses.replace(catalogue, instances=MappingProxyType({
        n: dataclasses.replace(i, usd_per_hour=MappingProxyType({region: i.price("us-east-1")}))
        for n, i in catalogue.instances.items()}), cpu_instances=MappingProxyType({
        n: dataclasses.replace(i, usd_per_hour=MappingProxyType({region: i.price("us-east-1")}))
        for n, i in catalogue.cpu_instances.items()}),
        ebs_gp3=MappingProxyType({region: catalogue.ebs_gp3["us-east-1"]} if ebs else {}))


def test_a_region_without_ebs_prices_is_unknown_never_guessed(project, catalogue):
    """Node-hours priced, volumes not: the groups say their hourly price, but no group, model or total has a
    monthly figure (it would leave the volumes out without saying so)."""
    from modelfleet.plan.compiler import compile_fleet
    env = type(project.environment("prod")).model_validate(
        {**project.environment("prod").model_dump(), "region": "eu-west-1"})
    table = _priced_in(catalogue, "eu-west-1", ebs=False)
    cost = compute_fleet_cost(compile_fleet(project.fleet(), env, table), table, env,
                              estimate_llm_loads(project.fleet(), "prod"))
    assert cost.unknown == ("EBS gp3 volumes: the price table's ebs_gp3 has no prices for eu-west-1",)
    assert cost.monthly_usd is None
    assert all(g.usd_per_node_hour is not None and g.volume_usd_per_node_month is None and g.monthly_usd is None
               for g in cost.node_groups)
    assert all(m.monthly_usd is None for m in cost.models)
