"""Which team an object belongs to: the value of its ``modelfleet.io/team`` label (Kubernetes) and tag (AWS).

A model's is its ``team`` (``unassigned`` without one). An object serving several models (a Triton server, a
node group) takes their one team when they share it, else ``shared``; objects of the whole fleet (the
namespace, the node role, the model-repository bucket, a created cluster) are ``shared``. Cost per team is
exact either way: it adds up the models' own costs (cost/fleet.py), not the labels.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..spec.team import SHARED, UNASSIGNED
from .types import FleetPlan, NodeGroupPlan, TritonServerPlan

TEAM_LABEL = "modelfleet.io/team"  # the same key on Kubernetes objects and AWS resources


def team_of(team: str | None) -> str:
    return team or UNASSIGNED


def team_label(teams: Iterable[str | None]) -> str:
    """One team's name, or ``shared`` for several (or none: an object of the whole fleet)."""
    found = {team_of(t) for t in teams}
    return found.pop() if len(found) == 1 else SHARED


def server_team(plan: FleetPlan, server: TritonServerPlan) -> str:
    return team_label(plan.model(name).team for name in server.models)


def workload_team(plan: FleetPlan, workload: str) -> str:
    """A Triton server's or a vLLM model's label value; ``shared`` for any other name (cluster objects)."""
    try:
        return server_team(plan, plan.server(workload))
    except KeyError:
        pass
    try:
        return team_of(plan.model(workload).team)
    except KeyError:
        return SHARED


def node_group_team(plan: FleetPlan, group: NodeGroupPlan) -> str:
    return team_label(m.team for m in plan.models if m.node_group == group.name) if any(
        m.node_group == group.name for m in plan.models) else SHARED


def tags(team: str) -> dict[str, str]:
    return {TEAM_LABEL: team}
