"""The shapes a dashboard is described in (pure data; modelfleet.grafana turns them into Grafana's JSON)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    kind: Literal["timeseries", "stat", "text"]
    description: str
    queries: tuple[Query, ...] = ()
    unit: str = "short"  # Grafana's unit ids: reqps, ms, percentunit, short, currencyUSD
    threshold: float | None = None  # drawn as a red line (timeseries) or colour step (stat): the SLA figure
    bad_below: bool = False  # red below the threshold instead of above it (a budget left)
    text: str = ""  # a text panel's markdown
    width: int = 8  # of Grafana's 24 columns


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


@dataclass(frozen=True)
class Dashboard:
    uid: str  # Grafana's limit is 40 characters
    title: str
    workload: str  # the cluster's name of the workload whose manifests carry it ("cluster" for the fleet overview)
    tags: tuple[str, ...]
    rows: tuple[Row, ...]

    def queries(self) -> tuple[Query, ...]:
        return tuple(query for row in self.rows for panel in row.panels for query in panel.queries)
