"""FleetPlan's lookups by name: what a scan would find, in constant time, without changing the plan as data."""

from __future__ import annotations

import copy
import pickle

import pytest

from modelfleet.plan.types import FleetPlan
from tests.conftest import STACKS


class CountingTuple(tuple):
    """A tuple that counts how often it is walked (iterated or reversed)."""

    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()

    def __reversed__(self):
        type(self).walks += 1
        return reversed(tuple(super().__iter__()))


@pytest.mark.parametrize("stack", STACKS)
def test_lookups_find_what_a_scan_finds(project, stack):
    plan = project.plan(stack)
    for name, items, lookup in (("models", plan.models, plan.model), ("node_groups", plan.node_groups, plan.node_group),
                                ("triton_servers", plan.triton_servers, plan.server)):
        assert items, f"{stack} has no {name}: the check below would be empty"
        for item in items:
            assert lookup(item.name) is next(i for i in items if i.name == item.name)
        with pytest.raises(KeyError):
            lookup("no-such-name")


@pytest.mark.parametrize("stack", STACKS)
def test_a_looked_up_plan_is_the_same_data(project, stack):
    fresh, used = project.plan(stack), project.plan(stack)
    for model in used.models:
        used.model(model.name)
        used.node_group(model.node_group)
    for server in used.triton_servers:
        used.server(server.name)
    assert used == fresh and fresh == used and hash(used) == hash(fresh)
    assert used.model_dump() == fresh.model_dump()
    assert used.model_dump_json() == fresh.model_dump_json()
    assert repr(used) == repr(fresh)
    assert pickle.loads(pickle.dumps(used)) == fresh and copy.deepcopy(used) == fresh
    assert FleetPlan.model_validate_json(used.model_dump_json()) == fresh


def test_a_copy_with_other_models_does_not_read_the_originals_index(plans):
    plan = plans["prod"]
    first = plan.models[0]
    assert plan.model(first.name) is first
    renamed = first.model_copy(update={"name": "renamed"})
    copied = plan.model_copy(update={"models": (renamed, *plan.models[1:])})
    assert copied.model("renamed") is renamed
    with pytest.raises(KeyError):
        copied.model(first.name)
    assert plan.model(first.name) is first


def test_the_first_item_of_a_name_wins_as_in_a_scan(plans):
    plan = plans["prod"]
    first = plan.models[0]
    twin = first.model_copy(update={"replicas": first.replicas + 1})
    doubled = FleetPlan.model_construct(**{**dict(plan), "models": (first, twin)})
    assert doubled.model(first.name) is first


def test_lookups_walk_the_tuple_once_not_once_per_lookup(plans):
    """A scan per lookup made rendering and costing 1,000 models quadratic (53,000 scans, 0.65 s)."""
    plan = plans["prod"]
    counted = FleetPlan.model_construct(**{**dict(plan), "models": CountingTuple(plan.models)})
    CountingTuple.walks = 0
    for _ in range(100):
        for model in plan.models:
            assert counted.model(model.name) == model
    assert CountingTuple.walks <= 1


@pytest.mark.parametrize("stack", STACKS)
def test_cost_lookups_find_what_a_scan_finds_and_change_nothing(project, stack):
    cost, fresh = project.plan_and_cost(stack)[1], project.plan_and_cost(stack)[1]
    for item in cost.models:
        assert cost.model(item.name) is next(m for m in cost.models if m.name == item.name)
    for group in cost.node_groups:
        assert cost.node_group(group.name) is next(g for g in cost.node_groups if g.name == group.name)
    with pytest.raises(KeyError):
        cost.model("no-such-model")
    assert cost == fresh and cost.model_dump_json() == fresh.model_dump_json()
