"""``team``: who owns a model. It feeds cost per team (``modelfleet cost``) and the ``modelfleet.io/team`` label
and tag on every object modelfleet renders or deploys (plan/teams.py decides the value per object).

A team is a DNS label, so it is a valid Kubernetes label value and AWS tag value as written. Two names are
reserved for what the label says of objects no single team owns: ``shared`` (several teams' models, or the
whole fleet's) and ``unassigned`` (models without a team).
"""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import AfterValidator, Field

from .values import FieldProblem

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
SHARED, UNASSIGNED = "shared", "unassigned"  # label values of objects no one team owns


def _not_reserved(value: str | None) -> str | None:
    if value in (SHARED, UNASSIGNED):
        raise FieldProblem((), f"team {value!r} is reserved: the label on objects of several teams is "
                           f"{SHARED!r}, on models without a team {UNASSIGNED!r}", "name the team that owns the model")
    return value


Team = Annotated[Optional[Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]], AfterValidator(_not_reserved),
                 Field(description="the team that owns it: a DNS label (lowercase letters, digits, '-'); its cost is "
                                   "reported per team and every object serving it carries the label "
                                   "modelfleet.io/team; 'shared' and 'unassigned' are reserved")]
