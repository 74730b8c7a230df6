"""Property: adding a model never lowers an environment's cost (at min, desired or max), and removing it
again restores the previous cost exactly, wherever in models.yaml it was written."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from modelfleet.compiler import compile_fleet
from modelfleet.cost import compute_fleet_cost, estimate_llm_loads
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


def classic(name, memory_gib, rps=1.0, per_instance=100.0, availability=99.0, replicas=None, dedicated=None):
    from modelfleet.spec import ClassicModelSpec
    overrides = {k: v for k, v in (("replicas", replicas), ("dedicated_gpu", dedicated)) if v}
    return ClassicModelSpec.model_validate({
        "name": name, "type": "vision", "framework": "onnx", "artifact": f"s3://bucket/triton/{name}",
        "size": {"memory_gib": memory_gib}, "inputs": [{"name": "x", "dtype": "fp32", "dims": [16]}],
        "outputs": [{"name": "y", "dtype": "fp32", "dims": [1]}],
        "sla": {"p99_latency_ms": 100, "peak_rps": rps, "availability": availability},
        "profile": {"rps_per_instance": per_instance, "compute_ms": 5}, "overrides": overrides})


DEDICATED = [classic(f"d{i}", 1.0, dedicated=True) for i in range(5)]
PROD, DEV = ENVIRONMENTS[0], ENVIRONMENTS[1]
KNOWN_CASES = {
    # Host RAM was checked after packing: m2 + m3 (14 GiB of weights) rejected g4dn.xlarge outright, until a
    # third model made FFD split them. Host RAM is now a packing dimension.
    "host-ram-rejected-the-instance-type": (DEV, DEDICATED[:2] + [classic("m2", 7.0), classic("m3", 7.0)],
                                            classic("added", 1.0, rps=18)),
    # A pinned `replicas: 1` on a shared server set the server's replicas, dropping a 99.9% neighbour to one.
    "a-pin-cut-a-neighbours-replicas": (PROD, [classic("m0", 1.0, availability=99.9)],
                                        classic("added", 1.0, replicas=1)),
    # Size-only order let a 1-replica model take a 2-replica server's room; needier models now go first.
    "replica-needs-were-ignored-by-the-order": (
        PROD, DEDICATED[:3] + [classic("m3", 1.0, availability=99.9), classic("m4", 5.0),
                               classic("m5", 6.0, availability=99.9)], classic("added", 1.0, rps=16)),
    # A genuine first-fit-decreasing anomaly (3 dimensions, replica weights): now packed optimally.
    "first-fit-decreasing-anomaly": (
        PROD, DEDICATED + [classic("m5", 2.0, rps=86, per_instance=358, availability=99.9),
                           classic("m6", 4.0, availability=99.9), classic("m7", 8.0), classic("m8", 6.0, replicas=2),
                           classic("m9", 4.0, replicas=3), classic("m10", 7.0, replicas=3)],
        classic("added", 1.0, rps=274, per_instance=615, replicas=2)),
    # Relaxing two limits at once (each non-binding only given the other) let m1 + m2 share a T4.
    "limits-relaxed-together": (DEV, DEDICATED[:1] + [classic("m1", 5.0), classic("m2", 10.0)],
                                classic("added", 1.0)),
}


@pytest.mark.parametrize("case", sorted(KNOWN_CASES))
def test_known_cases_found_by_the_property(catalogue, case):
    env, base, extra = KNOWN_CASES[case]
    before, after = _cost(base, env, catalogue), _cost(base + [extra], env, catalogue)
    assert before is not None and after is not None, "the case must compile to test anything"
    assert after.monthly_usd.desired >= before.monthly_usd.desired
    assert _cost(base, env, catalogue) == before


def test_a_pinned_neighbour_keeps_the_availability_replicas(catalogue):
    fleet = FleetSpec(models=(classic("m0", 1.0, availability=99.9), classic("added", 1.0, replicas=1)))
    plan = compile_fleet(fleet, PROD, catalogue)
    (server,) = plan.triton_servers
    assert server.models == ("added", "m0") and server.replicas == 2 and server.spread_zones
