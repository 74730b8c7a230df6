"""The GPU instance type choice packs only the types that can rank among the cheapest (packing/choice.py).

Two properties, on generated fleets and stacks (spot, single-replica, reservations, other workloads on the
types, declared pools, fleets past the exact search's 24 items):

- the floor never exceeds what a packing of the type costs, nor the GPUs its servers take;
- the first ``exact`` packings are those packing every type gives: same types, servers and prices, in the same
  order; every type left unpacked would cost more than the last of them.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelfleet.plan.rejection import Rejection
from modelfleet.plan.triton.packing.choice import Unpacked, gpu_placements, usd_floor
from modelfleet.plan.triton.packing.gpu import ClassicPlacement, checked_on
from modelfleet.spec.models import ClassicModelSpec
from tests.cost.fleets import ENVIRONMENTS, RESERVABLE, capacity_environments, classic_models


@st.composite
def gpu_fleets(draw, max_models: int = 40) -> list[ClassicModelSpec]:
    """Classic models for GPUs (none pinned to a CPU), some in declared pools."""
    count = draw(st.integers(1, max_models))
    out = []
    for i in range(count):
        model = draw(classic_models(f"m{i}"))
        data = model.model_dump(mode="json", exclude_defaults=True)
        data.pop("device", None)
        pool = draw(st.sampled_from((None, None, None, "batch", "online")))
        if pool is not None:
            data["pool"] = pool
        out.append(ClassicModelSpec.model_validate(data))
    return out


def in_use_on(draw_types: list[tuple[str, int, int]]) -> dict[str, tuple[int, int]]:
    return {name: (gpus, spread) for name, gpus, spread in draw_types}


held = st.lists(st.tuples(st.sampled_from(RESERVABLE), st.integers(0, 9), st.integers(0, 3)), max_size=3).map(in_use_on)


def same(placement: ClassicPlacement) -> tuple:
    return placement.instance.name, placement.usd_per_hour, placement.nodes, placement.servers


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fleet=gpu_fleets(), env=capacity_environments(minimum=None), in_use=held, exact=st.integers(1, 6))
def test_the_cheapest_packings_are_those_of_packing_every_type(catalogue, fleet, env, in_use, exact):
    every, every_result = gpu_placements(fleet, (), env, catalogue, in_use)
    some, some_result = gpu_placements(fleet, (), env, catalogue, in_use, exact=exact)
    assert [same(p) for p in some[:exact]] == [same(p) for p in every[:exact]]
    assert not any(isinstance(r, Unpacked) for r in every_result)
    by_type = {r.option if not isinstance(r, ClassicPlacement) else r.instance.name: r for r in every_result}
    for result in some_result:
        if isinstance(result, Rejection):  # the same reason, whether packed or not
            assert by_type[result.option] == result
        if isinstance(result, Unpacked):
            assert len(every) > exact and result.usd_floor > every[exact - 1].usd_per_hour
            packed = by_type[result.option]
            if isinstance(packed, ClassicPlacement):
                assert packed.usd_per_hour >= result.usd_floor - 1e-9 * max(1.0, result.usd_floor)
            assert result.reason.startswith(f"costs at least {result.usd_floor:.2f} USD/h, a lower bound")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(fleet=gpu_fleets(), env=capacity_environments(minimum=None), in_use=held)
def test_the_floor_is_below_every_packing(catalogue, fleet, env, in_use):
    _, results = gpu_placements(fleet, (), env, catalogue, in_use)
    for placement in results:
        if not isinstance(placement, ClassicPlacement):
            continue
        instance = placement.instance
        held_there = in_use.get(instance.name, (0, 0))
        checked = checked_on(fleet, env, catalogue, instance)
        usd, gpus = usd_floor(fleet, checked, env, catalogue, instance, held_there)
        assert usd <= placement.usd_per_hour + 1e-9 * max(1.0, placement.usd_per_hour), instance.name
        assert gpus <= sum(s.replicas for s in placement.servers), instance.name


def test_a_floor_is_tight_where_the_packing_is_one_server_per_model(catalogue):
    """Models too large to share a GPU: the floor counts exactly their servers, so it is their price."""
    fleet = [ClassicModelSpec.model_validate({
        "name": f"big{i}", "type": "vision", "framework": "onnx", "artifact": f"s3://bucket/triton/big{i}",
        "size": {"memory_gib": 14.0}, "inputs": [{"name": "x", "dtype": "fp32", "dims": [16]}],
        "outputs": [{"name": "y", "dtype": "fp32", "dims": [1]}],
        "sla": {"p99_latency_ms": 100, "peak_rps": 10, "availability": 99.0},
        "profile": {"rps_per_instance": 1000, "measured_on": "a10g", "compute_ms": 5}}) for i in range(3)]
    env = ENVIRONMENTS[0]
    instance = catalogue.instances["g5.4xlarge"]
    _, results = gpu_placements(fleet, (), env, catalogue, {})
    placement = next(r for r in results if isinstance(r, ClassicPlacement) and r.instance is instance)
    usd, gpus = usd_floor(fleet, checked_on(fleet, env, catalogue, instance), env, catalogue, instance)
    assert len(placement.servers) == 3 and gpus == sum(s.replicas for s in placement.servers)
    assert abs(usd - placement.usd_per_hour) < 1e-9
