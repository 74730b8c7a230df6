"""explore: every frontier point is what the real planner and the cost report give for that SLA and precision,
the frontier is monotone, and the current plan is on or above it; on the example fleet and generated models."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
from xml.etree import ElementTree

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelfleet.cost.explore import Exploration, explore_model
from modelfleet.cost.fleet import compute_fleet_cost, estimate_llm_loads
from modelfleet.plan.compiler import compile_fleet, models_in
from modelfleet.project import Project
from modelfleet.spec.load import with_fields
from modelfleet.spec.models import FleetSpec, LlmModelSpec
from tests.conftest import ROOT
from tests.cost.fleets import ENVIRONMENTS, classic_models, summary


@functools.cache
def example():
    project = Project(str(ROOT))
    return project.fleet(), project.catalogue(), {s: project.environment(s) for s in ("prod", "dev")}


def replanned_cost(fleet: FleetSpec, env, catalogue, name: str, point) -> tuple[float, object]:
    """The point's changes and SLA written into the model, compiled by compile_fleet and priced as `cost` does."""
    model = {m.name: m for _, m in models_in(fleet, env.name)}[name]
    field = "sla.p99_ttft_ms" if isinstance(model, LlmModelSpec) else "sla.p99_latency_ms"
    spec = with_fields(model, (*point.changes, (field, point.sla_p99_ms)))
    one = FleetSpec(models=(spec,))
    plan = compile_fleet(one, env, catalogue)
    cost = compute_fleet_cost(plan, catalogue, env, estimate_llm_loads(one, env.name))
    return round(cost.model(name).monthly_usd.desired, 2), plan.model(name)


def check_exploration(found: Exploration, fleet: FleetSpec, env, catalogue) -> None:
    frontier = found.frontier
    assert frontier, f"{found.model}: no frontier"
    for point in frontier:
        cost, planned = replanned_cost(fleet, env, catalogue, found.model, point)
        assert cost == point.monthly_usd, (found.model, point)
        if point != found.current:  # the declared entry is what `plan` gives, even when a pin makes it miss
            assert point.p99_ms <= point.sla_p99_ms + 1e-9, point
        if found.kind == "llm":
            assert planned.estimated_ttft_ms == point.p99_ms, (point, planned.estimated_ttft_ms)
    # monotone: along rising latency the cost strictly falls, and no point planned beats a frontier point
    for slower, faster in zip(frontier[1:], frontier):
        assert slower.p99_ms > faster.p99_ms and slower.monthly_usd < faster.monthly_usd, (faster, slower)
    for f in frontier:
        beaten = [p for p in found.points if p.monthly_usd <= f.monthly_usd and p.p99_ms <= f.p99_ms
                  and (p.monthly_usd, p.p99_ms) != (f.monthly_usd, f.p99_ms)]
        assert not beaten, (f, beaten)
    current = found.current
    assert current is not None
    assert any(f.monthly_usd <= current.monthly_usd and f.p99_ms <= current.p99_ms for f in frontier)


@pytest.mark.parametrize("stack", ["prod", "dev"])
@pytest.mark.parametrize("name", ["llama-3-1-8b-instruct", "llama-3-3-70b-instruct", "fraud-scorer",
                                  "resnet50-classifier"])
def test_example_frontier_replans_to_the_same_cost(stack, name):
    fleet, catalogue, envs = example()
    found = explore_model(fleet, envs[stack], catalogue, name)
    check_exploration(found, fleet, envs[stack], catalogue)


def test_fp8_is_a_series_and_the_current_plan_is_the_declared_entry():
    fleet, catalogue, envs = example()
    found = explore_model(fleet, envs["prod"], catalogue, "llama-3-3-70b-instruct")
    assert {"bf16", "fp8 weights", "bf16 + fp8 KV cache", "fp8 weights + fp8 KV cache"} <= {p.series for p in found.points}
    plan = Project(str(ROOT)).plan("prod").model("llama-3-3-70b-instruct")
    assert (found.current.instance_type, found.current.p99_ms) == (plan.instance_type, plan.estimated_ttft_ms)


@st.composite
def llm_models(draw, name: str) -> LlmModelSpec:
    tpot = draw(st.sampled_from((None, 40, 80)))
    return LlmModelSpec.model_validate({
        "name": name, "type": "llm", "artifact": f"org/{name}", "size": {"dtype": "bf16"},
        "architecture": draw(st.sampled_from(("llama-3.2-3b", "qwen2.5-7b", "mistral-7b", "qwen2.5-14b"))),
        "sla": {"max_context_tokens": draw(st.sampled_from((2048, 8192))), "avg_input_tokens": 1000,
                "avg_output_tokens": 200, "peak_concurrent_sequences": draw(st.integers(1, 96)),
                "p99_ttft_ms": draw(st.sampled_from((300, 800, 2000, 6000))),
                **({"p99_tpot_ms": tpot} if tpot else {})},
    })


SINGLE_REPLICA_MISS = LlmModelSpec.model_validate({  # dev's one replica misses a 300 ms TTFT: no frontier step
    "name": "gen", "type": "llm", "artifact": "org/gen", "size": {"dtype": "bf16"}, "architecture": "llama-3.2-3b",
    "sla": {"max_context_tokens": 2048, "avg_input_tokens": 1000, "avg_output_tokens": 200,
            "peak_concurrent_sequences": 4, "p99_ttft_ms": 300}})


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=st.one_of(llm_models("gen"), classic_models("gen")), env=st.sampled_from(ENVIRONMENTS[:2]))
def test_generated_frontier_replans_to_the_same_cost(model, env):
    _, catalogue, _ = example()
    fleet = FleetSpec(models=(model,))
    found = explore_model(fleet, env, catalogue, "gen")
    if found.current is None:  # the declared entry does not compile alone: its frontier is still checked
        assert all(p.p99_ms > 0 and p.monthly_usd > 0 for p in found.points), summary(model)
        if found.frontier:
            check_exploration(found.model_copy(update={"current": found.frontier[-1]}), fleet, env, catalogue)
        return
    check_exploration(found, fleet, env, catalogue)


def test_a_single_replica_that_misses_its_target_is_no_frontier_step():
    _, catalogue, _ = example()
    found = explore_model(FleetSpec(models=(SINGLE_REPLICA_MISS,)), ENVIRONMENTS[1], catalogue, "gen")
    assert found.current is not None and found.current.p99_ms > found.current.sla_p99_ms, "plan's own: it misses"
    assert all(p.p99_ms <= p.sla_p99_ms for p in found.points if p is not found.current)
    check_exploration(found, FleetSpec(models=(SINGLE_REPLICA_MISS,)), ENVIRONMENTS[1], catalogue)


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(ROOT), *args],
                          capture_output=True, text=True, cwd=ROOT, check=False)


def test_explore_command_table_json_and_plots(tmp_path):
    png, svg = tmp_path / "f.png", tmp_path / "f.svg"
    table = cli("explore", "llama-3-1-8b-instruct", "--stack", "prod", "--plot", str(png))
    assert table.returncode == 0, table.stderr
    assert "frontier" in table.stdout and "current: bf16 on g6e.xlarge" in table.stdout
    data = json.loads(cli("explore", "fraud-scorer", "--stack", "prod", "--json", "--plot", str(svg)).stdout)
    assert data["kind"] == "classic" and any(p["frontier"] for p in data["points"])
    PIL = pytest.importorskip("PIL.Image")
    with PIL.open(png) as image:
        image.verify()
        assert image.format == "PNG" and image.size[0] > 100
    assert svg.read_bytes().startswith(b"<?xml") and ElementTree.parse(svg).getroot().tag.endswith("svg")


def test_explore_refuses_an_unknown_model_and_plot_format(tmp_path):
    unknown = cli("explore", "nope", "--stack", "prod")
    assert unknown.returncode == 2 and "no model named 'nope'" in unknown.stderr
    wrong = cli("explore", "fraud-scorer", "--stack", "prod", "--plot", str(tmp_path / "f.pdf"))
    assert wrong.returncode == 2 and ".svg or .png" in wrong.stderr


def test_a_tpot_target_other_than_the_declared_one_replans_to_the_same_cost():
    fleet, catalogue, envs = example()
    found = explore_model(fleet, envs["prod"], catalogue, "llama-3-3-70b-instruct", tpot_ms=120)
    assert all(("sla.p99_tpot_ms", 120) in p.changes for p in found.points if p is not found.current)
    assert found.current.changes == () and "TPOT 120 ms (--tpot-ms" in " ".join(found.basis)
    check_exploration(found, fleet, envs["prod"], catalogue)


def test_a_model_declared_by_its_config_json_explores_and_replans():
    """DeepSeek-V3 of examples/ (architecture: {config: ...}): each variant is validated again with the config
    the loader read, so its figures and published dtype carry over."""
    project = Project(str(ROOT / "examples" / "deepseek-v3"))
    fleet, env, catalogue = project.fleet(), project.environment("prod"), project.catalogue()
    found = explore_model(fleet, env, catalogue, "deepseek-v3")
    current = found.current
    assert current is not None  # on the frontier or above it: some frontier point is as cheap and as fast
    assert any(f.monthly_usd <= current.monthly_usd and f.p99_ms <= current.p99_ms for f in found.frontier)
    check_exploration(found, fleet, env, catalogue)
