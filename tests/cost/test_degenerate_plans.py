"""Plans at the edges the fuzzer found: shares and throughputs the plan rounds to 0 are still priced, by a
stated rule, and never divide by zero (formerly the known defects zero-gpu-share and zero-rps-unit-cost)."""

from __future__ import annotations

import json
import shutil

import pytest

from modelfleet.cost.fleet import compute_fleet_cost, estimate_llm_loads
from modelfleet.cost.report import CostView, render_cost_json, render_cost_markdown, render_cost_text
from modelfleet.plan.types import TritonModelPlan
from modelfleet.project import Project
from tests.conftest import ROOT
from tests.hardening.known_defects import classic, classic_pair

H = 730


def _project(tmp_path, text: str) -> Project:
    (tmp_path / "models.yaml").write_text(text)
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    return Project(root=str(tmp_path))


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    """Two classic models of 0.001 GiB at 0.001 inferences/s, packed on one GPU: gpu_share 0 for both in prod."""
    return _project(tmp_path_factory.mktemp("pair"), classic_pair("0.001", "100000", "0.001"))


def test_every_share_zero_splits_the_server_by_gpu_memory(tiny_pair):
    costed = tiny_pair.costed("prod")
    plan, cost = costed.plan, costed.cost
    a, b = plan.model("a"), plan.model("b")
    assert (a.gpu_share, b.gpu_share) == (0.0, 0.0) and a.server == b.server  # what the fuzzer found
    assert (a.gpu_memory_gib, b.gpu_memory_gib) == (0.001, 0.001)
    # g6.xlarge, 1-1-3 nodes (max 2 replicas and a rollout's surge one): 1 x (0.8048 x 730 + 16 EBS) = 603.50 at desired
    group = cost.node_group(a.node_group)
    assert (group.instance_type, group.nodes) == ("g6.xlarge", (1, 1, 3))
    for name in ("a", "b"):
        model = cost.model(name)
        assert model.monthly_usd.desired == pytest.approx((0.8048 * H + 16) / 2)  # 301.75 each: 0.001 of 0.002 GiB
        assert "every gpu_share on it is 0" in model.attribution
        assert "split by GPU memory: 0.001 of 0.002 GiB" in model.attribution
    assert sum(m.monthly_usd.desired for m in cost.models) == pytest.approx(group.monthly_usd.desired)
    assert "when every gpu_share on a server rounds to 0, by GPU memory" in cost.attribution_rule


def _with(plan, **updates):
    models = tuple(m.model_copy(update=updates) if isinstance(m, TritonModelPlan) else m for m in plan.models)
    return plan.model_copy(update={"models": models})


def test_every_share_and_memory_zero_splits_equally(tiny_pair):
    plan = _with(tiny_pair.plan("dev"), gpu_share=0.0, gpu_memory_gib=0.0)
    env = tiny_pair.environment("dev")
    cost = compute_fleet_cost(plan, tiny_pair.catalogue(), env, estimate_llm_loads(tiny_pair.fleet(), "dev"))
    group = cost.node_groups[0]
    assert [cost.model(n).monthly_usd.desired for n in ("a", "b")] == [pytest.approx(group.monthly_usd.desired / 2)] * 2
    assert "all 0 too, so split equally, 1 of 2 (with b)" in cost.model("a").attribution


def test_one_zero_share_beside_a_real_one_pays_its_share_of_nothing(tiny_pair):
    plan = tiny_pair.plan("dev")
    models = tuple(m.model_copy(update={"gpu_share": 0.25 if m.name == "a" else 0.0}) for m in plan.models)
    plan = plan.model_copy(update={"models": models})
    env = tiny_pair.environment("dev")
    cost = compute_fleet_cost(plan, tiny_pair.catalogue(), env, estimate_llm_loads(tiny_pair.fleet(), "dev"))
    assert cost.model("b").monthly_usd.desired == 0.0  # under 0.005% of the GPU: gpu_share still decides
    assert cost.model("a").monthly_usd.desired == pytest.approx(cost.node_groups[0].monthly_usd.desired)
    assert "gpu_share 0.25 of 0.25" in cost.model("a").attribution


@pytest.fixture(scope="module")
def crawling(tmp_path_factory):
    """p99 of 600 s, no profile, 144 replicas pinned: the plan's rps_per_instance rounds to 0."""
    return _project(tmp_path_factory.mktemp("slow"),
                    classic(p99="600000", rps="1000", profile="", overrides="replicas: 144, max_batch_size: 1"))


def test_zero_throughput_has_a_cost_but_no_finite_unit_cost(crawling):
    costed = crawling.costed("prod")
    assert costed.plan.model("scorer").rps_per_instance == 0.0
    scorer = costed.cost.model("scorer")
    assert scorer.monthly_usd.desired == pytest.approx(144 * (0.8048 * H + 16))  # 144 g6.xlarge: 86,904.58
    unit = scorer.unit_cost
    assert unit.value is None and unit.basis == "0 inferences/s"
    assert unit.shortfall == ("under-provisioned: 144 replica(s) serve no measurable part of the 1000 inferences/s "
                              "at peak (rps_per_instance 0 in the plan: under 0.005/s), so no finite cost per inference")


def test_every_format_shows_a_missing_unit_cost(crawling):
    costed = crawling.costed("prod")
    view = CostView("prod", costed.cost, costed.budget, ())
    text = render_cost_text([view])
    assert "no finite USD per 1,000 inferences" in text
    assert "WARNING: under-provisioned: 144 replica(s) serve no measurable part" in text
    assert "the unit cost is at what they serve" not in text  # there is no unit cost to qualify
    markdown = render_cost_markdown([view])
    assert "| no finite USD per 1,000 inferences at 0 inferences/s ⚠️ under-provisioned" in markdown
    data = json.loads(render_cost_json([view]))["environments"]["prod"]
    assert data["models"][0]["unit_cost"]["value"] is None
