"""Grafana dashboard JSON from modelfleet's dashboard descriptions, built with grafana-foundation-sdk.

Why an edge module: the SDK is Grafana's maintained, generated builder (about 5 MB, versioned per Grafana
schema: pinned in the ``dashboards`` extra). The compiler describes each dashboard as plain data
(``modelfleet.render.observability.dashboards``: panels, queries, SLA lines) and never imports the SDK, so
``validate``, ``plan`` and ``cost`` (the pull-request check) run without it; ``render`` and the Pulumi program
hand :func:`build_dashboard` to the renderer (``dashboard_builder``). The result is deterministic: the SDK
writes no timestamps or generated ids, and panel ids are given here in order.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import Issue, MissingExtra
from ..render.observability.panels import Dashboard, Panel

EXTRA = "dashboards"  # pyproject.toml's optional extra holding the SDK
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
PANEL_HEIGHT = 8


def dashboard_builder():
    """:func:`build_dashboard`, or a located error naming the extra to install when the SDK is missing."""
    try:
        import grafana_foundation_sdk  # noqa: F401
    except ImportError:
        raise MissingExtra([Issue("", 0, 0, "", "rendering dashboards needs grafana-foundation-sdk, which is not "
                               "installed", f"pip install 'modelfleet[{EXTRA}]'")]) from None
    return build_dashboard


def build_dashboard(spec: Dashboard) -> dict[str, Any]:
    """The Grafana dashboard model (what a dashboard's JSON holds), as plain data."""
    from grafana_foundation_sdk.builders import dashboard as d
    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    builder = (d.Dashboard(spec.title).uid(spec.uid).tags(list(spec.tags)).editable().refresh("1m")
               .time("now-6h", "now").timezone("browser").with_variable(_datasource_variable()))
    panel_id = 0
    for row in spec.rows:
        panel_id += 1
        builder = builder.with_row(d.Row(row.title).id(panel_id))
        for panel in row.panels:
            panel_id += 1
            builder = builder.with_panel(_panel(panel).id(panel_id))
    return json.loads(json.dumps(builder.build(), cls=JSONEncoder, sort_keys=True))


def _datasource_variable():
    from grafana_foundation_sdk.builders import dashboard as d

    return d.DatasourceVariable("datasource").label("Prometheus").type("prometheus")


def _panel(panel: Panel):
    if panel.kind == "text":
        from grafana_foundation_sdk.builders import text
        from grafana_foundation_sdk.models.text import TextMode

        return (text.Panel().title(panel.title).description(panel.description).mode(TextMode.MARKDOWN)
                .content(panel.text).span(panel.width).height(PANEL_HEIGHT))
    builder = _timeseries(panel) if panel.kind == "timeseries" else _stat(panel)
    builder = (builder.title(panel.title).description(panel.description).unit(panel.unit).span(panel.width)
               .height(PANEL_HEIGHT).datasource(_datasource()).thresholds(_thresholds(panel.threshold, panel.bad_below)))
    for index, query in enumerate(panel.queries):
        builder = builder.with_target(_target(query.expr, query.legend, chr(ord("A") + index % 26) + str(index // 26 or "")))
    return builder


def _timeseries(panel: Panel):
    from grafana_foundation_sdk.builders import timeseries
    from grafana_foundation_sdk.builders.common import GraphThresholdsStyleConfig
    from grafana_foundation_sdk.models.common import GraphThresholdsStyleMode

    mode = GraphThresholdsStyleMode.OFF if panel.threshold is None else GraphThresholdsStyleMode.LINE
    return timeseries.Panel().thresholds_style(GraphThresholdsStyleConfig().mode(mode))


def _stat(panel: Panel):
    from grafana_foundation_sdk.builders import stat

    return stat.Panel()


def _thresholds(value: float | None, bad_below: bool):
    """Green below the SLA figure and red from it; or, ``bad_below``, red below it (a budget left under 0)."""
    from grafana_foundation_sdk.builders.dashboard import ThresholdsConfig
    from grafana_foundation_sdk.models.dashboard import Threshold, ThresholdsMode

    low, high = ("red", "green") if bad_below else ("green", "red")
    steps = [Threshold(value=None, color=low)]
    if value is not None:
        steps.append(Threshold(value=float(value), color=high))
    return ThresholdsConfig().mode(ThresholdsMode.ABSOLUTE).steps(steps)


def _target(expr: str, legend: str, ref: str):
    from grafana_foundation_sdk.builders import prometheus

    return prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(ref)


def _datasource():
    from grafana_foundation_sdk.models.dashboard import DataSourceRef

    return DataSourceRef(type_val=DATASOURCE["type"], uid=DATASOURCE["uid"])
