"""The shared-server packer is optimal: checked against brute force over every set partition."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.plan.triton.packing.binpacking import Item, Objective, first_fit, pack_optimally, shed_replicas


def _partitions(items):
    if not items:
        yield []
        return
    head, rest = items[0], items[1:]
    for partition in _partitions(rest):
        for i in range(len(partition)):
            yield partition[:i] + [[head] + partition[i]] + partition[i + 1:]
        yield [[head]] + partition


def _feasible(groups, limits, max_replicas=math.inf):
    """GPU memory and host RAM bound a server; compute sets its replicas, up to ``max_replicas``."""
    return all(sum(it.size[d] for it in g) <= limits[d] for g in groups for d in (0, 2)) and all(
        sum(it.size[1] for it in g) <= limits[1] * max_replicas + 1e-9 for g in groups)


def _score(groups, objective, per_replica=1.0):
    pods, spread = objective.fixed_pods, objective.fixed_spread
    for g in groups:
        count = max(max(it.need for it in g), math.ceil(sum(it.size[1] for it in g) / per_replica - 1e-9))
        pods += count
        lowest = min(max(it.floor for it in g), count)
        if lowest >= 2:
            spread = max(spread, lowest)
    return objective.score(pods, spread)


item = st.builds(lambda n, m, c, h, need, floor: (n, (m, c, h), need, min(floor, need)),
                 st.just(""), st.floats(0.5, 12.0), st.floats(0.0, 1.0), st.floats(0.1, 10.0),
                 st.integers(1, 3), st.integers(1, 3))


@settings(max_examples=300, deadline=None)
@given(raw=st.lists(item, min_size=1, max_size=7), limits=st.tuples(st.floats(12.0, 24.0), st.just(1.0),
       st.floats(10.0, 30.0)), gpus=st.sampled_from((1, 4, 8)), fixed=st.integers(0, 3),
       single=st.booleans())
def test_the_packing_is_feasible_and_as_cheap_as_brute_force(raw, limits, gpus, fixed, single):
    items = sorted((Item(f"m{i}", size, need, floor) for i, (_, size, need, floor) in enumerate(raw)),
                   key=lambda it: (-it.need, -max(it.size[0] / limits[0], it.size[1]), it.name))
    most = 1 if single else math.inf  # single-replica environments: compute bounded by one replica
    if single:
        raw = [(n, size, 1, 1) for n, size, _, _ in raw]
    objective = Objective(gpus, fixed, fixed if fixed >= 2 else 0, most)
    by_name = {it.name: it for it in items}
    packed = [[by_name[n] for n in group] for group in pack_optimally(items, limits, objective)]
    assert sorted(it.name for g in packed for it in g) == sorted(by_name)
    assert _feasible(packed, limits, most)
    best = min(_score(p, objective, limits[1]) for p in _partitions(items) if _feasible(p, limits, most))
    assert _score(packed, objective, limits[1]) == best


def test_first_fit_decreasing_is_kept_when_it_is_already_optimal():
    items = [Item("a", (8.0, 0.1, 1.0), 2, 2), Item("b", (6.0, 0.1, 1.0), 2, 2), Item("c", (5.0, 0.1, 1.0), 1, 1)]
    limits = (13.5, 1.0, 10.0)
    assert first_fit(items, limits) == [[0, 2], [1]]  # c fits next to a first
    # {a}, {b, c} costs the same 2 + 2 pods: a tie, so first-fit decreasing's packing stays
    assert pack_optimally(items, limits, Objective(1)) == [["a", "c"], ["b"]]


def test_a_limit_is_relaxed_only_while_the_others_still_hold():
    # Host RAM alone allows one model per server, and so does GPU memory alone: neither may be dropped
    # on the strength of the other, or both are dropped and m1 + m2 (15 GiB) share a 14.25 GiB GPU.
    items = [Item("m2", (8.0, 0.01, 8.0), 1, 1), Item("m1", (7.0, 0.01, 7.0), 1, 1)]
    assert pack_optimally(items, (14.25, 1.0, 11.9), Objective(1)) == [["m2"], ["m1"]]


def test_a_server_holds_the_compute_its_replicas_provide():
    # Two models at 0.8 GPU of compute each, both needing 2 replicas for availability: one server of 2
    # replicas holds both (1.6 <= 2 GPUs), as _replicas' load rule runs it; capped at 1 GPU, it took two
    # servers of 2 replicas (4 pods).
    items = [Item("a", (2.0, 0.8, 1.0), 2, 2), Item("b", (2.0, 0.8, 1.0), 2, 2)]
    assert pack_optimally(items, (20.0, 1.0, 10.0), Objective(1)) == [["a", "b"]]
    # past the replicas a server grows by one: three such models cost 3 pods together (2.4 GPUs), not 4
    three = items + [Item("c", (2.0, 0.8, 1.0), 2, 2)]
    groups = pack_optimally(three, (20.0, 1.0, 10.0), Objective(1))
    assert _score([[i for i in three if i.name in g] for g in groups], Objective(1)) == (3, 3)
    # where a server runs one replica whatever (singleReplica environments), compute still bounds it
    assert pack_optimally(items, (20.0, 1.0, 10.0), Objective(1, max_replicas=1)) == [["a"], ["b"]]


def test_shedding_fills_whole_replicas_before_a_server_grows():
    # first fit fills the first server's memory (4 x 2 of 8 GiB) at 1.5 GPUs (2 pods), the second holds 0.3
    # (1 pod): moving a 0.25 across, then swapping a 0.5 for a 0.1, leaves 0.85 + 0.95: 2 pods, not 3
    items = [Item(f"m{i}", (2.0, c, 0.1), 1, 1) for i, c in enumerate((0.5, 0.5, 0.25, 0.25, 0.1, 0.1, 0.1))]
    first = first_fit(items, (8.0, 1.0, 10.0))
    assert [sum(items[i].size[1] for i in b) for b in first] == pytest.approx([1.5, 0.3])
    shed = shed_replicas(items, first, (8.0, 1.0, 10.0))
    assert _score([[items[i] for i in b] for b in shed], Objective(1)) == (2, 2)
    assert _score([[items[i] for i in b] for b in first], Objective(1)) == (3, 3)
