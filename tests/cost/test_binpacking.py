"""The shared-server packer is optimal: checked against brute force over every set partition."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.binpacking import Item, Objective, first_fit, pack_optimally


def _partitions(items):
    if not items:
        yield []
        return
    head, rest = items[0], items[1:]
    for partition in _partitions(rest):
        for i in range(len(partition)):
            yield partition[:i] + [[head] + partition[i]] + partition[i + 1:]
        yield [[head]] + partition


def _feasible(groups, limits):
    return all(sum(it.size[d] for it in g) <= limits[d] for g in groups for d in range(3))


def _score(groups, objective):
    pods, spread = objective.fixed_pods, objective.fixed_spread
    for g in groups:
        need = max(it.need for it in g)
        pods += need
        lowest = min(max(it.floor for it in g), need)
        if lowest >= 2:
            spread = max(spread, lowest)
    return objective.score(pods, spread)


item = st.builds(lambda n, m, c, h, need, floor: (n, (m, c, h), need, min(floor, need)),
                 st.just(""), st.floats(0.5, 12.0), st.floats(0.0, 0.9), st.floats(0.1, 10.0),
                 st.integers(1, 3), st.integers(1, 3))


@settings(max_examples=300, deadline=None)
@given(raw=st.lists(item, min_size=1, max_size=7), limits=st.tuples(st.floats(12.0, 24.0), st.just(1.0),
       st.floats(10.0, 30.0)), gpus=st.sampled_from((1, 4, 8)), fixed=st.integers(0, 3))
def test_the_packing_is_feasible_and_as_cheap_as_brute_force(raw, limits, gpus, fixed):
    items = sorted((Item(f"m{i}", size, need, floor) for i, (_, size, need, floor) in enumerate(raw)),
                   key=lambda it: (-it.need, -max(it.size[0] / limits[0], it.size[1]), it.name))
    objective = Objective(gpus, fixed, fixed if fixed >= 2 else 0)
    by_name = {it.name: it for it in items}
    packed = [[by_name[n] for n in group] for group in pack_optimally(items, limits, objective)]
    assert sorted(it.name for g in packed for it in g) == sorted(by_name)
    assert _feasible(packed, limits)
    best = min(_score(p, objective) for p in _partitions(items) if _feasible(p, limits))
    assert _score(packed, objective) == best


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
