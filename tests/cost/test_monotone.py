"""Property: adding a model never lowers an environment's cost (at min, desired or max), and removing it
again restores the previous cost exactly, wherever in models.yaml it was written."""

from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from modelfleet.compiler import compile_fleet
from modelfleet.cost import LEVELS, compute_fleet_cost, estimate_llm_loads
from modelfleet.errors import CompileError
from modelfleet.spec import FleetSpec
from tests.cost.fleets import ENVIRONMENTS, fleets, models, summary


def _cost(models_list, env, catalogue):
    fleet = FleetSpec(models=tuple(models_list))
    try:
        plan = compile_fleet(fleet, env, catalogue)
    except CompileError:
        return None
    return compute_fleet_cost(plan, catalogue, env, estimate_llm_loads(fleet, env.name))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=fleets(), extra=models("added"), env=st.sampled_from(ENVIRONMENTS), position=st.integers(0, 10))
def test_adding_a_model_never_lowers_the_cost_and_removing_it_restores_it(catalogue, base, extra, env, position):
    before = _cost(base, env, catalogue)
    assume(before is not None)
    grown = list(base)
    grown.insert(position % (len(base) + 1), extra)
    after = _cost(grown, env, catalogue)
    assume(after is not None)
    assert after.monthly_usd.desired >= before.monthly_usd.desired - 1e-6, (
        f"adding {extra.name} lowered the cost of {env.name}: "
        f"{before.monthly_usd.desired:.2f} -> {after.monthly_usd.desired:.2f}\n"
        + "\n".join(summary(m) for m in grown))
    restored = _cost([m for m in grown if m.name != extra.name], env, catalogue)
    assert restored == before
