"""Formatting cost previews and cost diffs as text (terminals), markdown (PR comments) and JSON (tools).

Pure: values in, strings out. Money is shown to the cent with thousands separators; JSON keys are sorted
and floats rounded to the cent (node-hour prices and unit costs keep their precision).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .cost import FleetCost, ModelCost, MonthlyUsd, UnitCost
from .cost_diff import EnvironmentDiff, FleetDiff, ModelChange
from .cost_diff import usd as format_usd
from .policy import BudgetStatus

COMMENT_MARKER = "<!-- modelfleet-cost -->"  # the PR workflow updates the one comment carrying it
UNIT_LABELS = {"usd_per_1k_inferences": "per 1,000 inferences", "usd_per_million_tokens": "per million tokens"}
EXACT_KEYS = {"usd_per_node_hour"}
SIGNIFICANT_KEYS = {"value"}


@dataclass(frozen=True)
class CostView:
    """One environment's cost with its guardrail results, as the cost command shows it."""

    cost: FleetCost
    budget: BudgetStatus | None
    violations: tuple[str, ...]


def usd(value: float | None, signed: bool = False) -> str:
    return "unknown" if value is None else format_usd(value, signed)


def _range(m: MonthlyUsd | None) -> str:
    return "unknown" if m is None else f"{usd(m.min)} / {usd(m.desired)} / {usd(m.max)}"


def _unit(unit: UnitCost | None) -> str:
    return "-" if unit is None else f"USD {significant(unit.value)} {UNIT_LABELS[unit.metric]}"


def significant(value: float, digits: int = 3) -> str:
    """Three significant digits without scientific notation: 0.0000423, 0.00121, 12.1, 127."""
    if value == 0:
        return "0"
    places = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{places}f}"


def _budget_line(budget: BudgetStatus | None) -> str:
    if budget is None:
        return "budget: none set (modelfleet:budget)"
    verdict = ("OVER BUDGET" if budget.over else "ok") + (f", on_exceed {budget.on_exceed}" if budget.over else "")
    return f"budget: {budget.describe()} [{verdict}]"


# ---------------------------------------------------------------------------------------------- text
def render_cost_text(views: Sequence[CostView]) -> str:
    return "\n".join(_environment_text(v) for v in views)


def _environment_text(view: CostView) -> str:
    c = view.cost
    lines = [f"{c.environment}: {c.region}, {c.capacity_type}; monthly = {c.hours_per_month:g} h",
             *(f"  prices: {b}" for b in c.price_basis), "",
             f"  {'node group':28} {'instance':14} {'USD/h/node':>10}  {'nodes':9} USD/month min / desired / max"]
    for g in c.node_groups:
        price = "unknown" if g.usd_per_node_hour is None else f"{g.usd_per_node_hour:.8g}"
        lines.append(f"  {g.name:28} {g.instance_type:14} {price:>10}  {'-'.join(map(str, g.nodes)):9} "
                     f"{_range(g.monthly_usd)}")
    control = ("not created by this stack (modelfleet:cluster.create: false)" if c.control_plane_monthly_usd is None
               else f"{usd(c.control_plane_monthly_usd)} every month")
    lines += [f"  {'EKS control plane':28} {control}", f"  {'total':28} {'':14} {'':>10}  {'':9} {_range(c.monthly_usd)}",
              "", f"  {'model':28} {'GPUs':9} {'USD/month min / desired / max':38} unit cost at peak"]
    for m in c.models:
        lines += _model_text(m)
    lines += ["", f"  {_budget_line(view.budget)}"]
    lines += [f"  POLICY: {v}" for v in view.violations] + [f"  UNKNOWN: {u}" for u in c.unknown]
    lines += ["", f"  rule: {c.attribution_rule}", ""]
    return "\n".join(lines)


def _model_text(m: ModelCost) -> list[str]:
    gpus = "-".join(map(str, m.gpus))
    out = [f"  {m.name:28} {gpus:9} {_range(m.monthly_usd):38} {_unit(m.unit_cost)}",
           f"  {'':28}   {m.serving} on {m.instance_type}: {m.attribution}"]
    if m.unit_cost is not None:
        out.append(f"  {'':28}   throughput: {m.unit_cost.assumption}")
    return out


def render_diff_text(diff: FleetDiff) -> str:
    lines = [f"cost change: {diff.base} -> {diff.head} (USD per month at desired replicas)", ""]
    for env in diff.environments:
        lines.append(f"{env.environment}: {usd(_desired(env.before))} -> {usd(_desired(env.after))} "
                     f"({usd(_desired(env.delta), signed=True)}); min/max change {_minmax(env.delta)}")
        for change in env.changes:
            lines.append(f"  {change.status:8} {change.name:28} {usd(change.delta_usd, signed=True):>14}  "
                         f"{change.layout}")
            lines += [f"  {'':8} {'':28} {'':>14}  - {r}" for r in change.reasons]
        lines += [f"  node group {n}" for n in env.node_groups]
        lines += [f"  {_budget_line(env.budget)}"] + [f"  POLICY: {v}" for v in env.violations]
        lines += [f"  UNKNOWN: {u}" for u in env.unknown] + [""]
    lines += ["assumptions:"] + [f"  - {a}" for a in diff.assumptions]
    return "\n".join(lines) + "\n"


def _desired(m: MonthlyUsd | None) -> float | None:
    return None if m is None else m.desired


def _minmax(m: MonthlyUsd | None) -> str:
    return "unknown" if m is None else f"{usd(m.min, signed=True)} / {usd(m.max, signed=True)}"


# ---------------------------------------------------------------------------------------------- markdown
def render_cost_markdown(views: Sequence[CostView]) -> str:
    lines = [COMMENT_MARKER, "### modelfleet cost preview", "",
             "| environment | USD/month (min / desired / max) | budget |", "|---|---:|---|"]
    lines += [f"| {v.cost.environment} | {_range(v.cost.monthly_usd)} | {_budget_cell(v.budget)} |" for v in views]
    for v in views:
        lines += ["", f"#### {v.cost.environment}", "", "| model | runs on | USD/month desired | unit cost at peak |",
                  "|---|---|---:|---|"]
        lines += [f"| `{m.name}` | {m.instance_type} | {usd(m.monthly_usd.desired if m.monthly_usd else None)} | "
                  f"{_unit(m.unit_cost)} |" for m in v.cost.models]
        lines += _problems_md(v.violations, v.cost.unknown)
    lines += _assumptions_md(sorted({a for v in views for a in (*v.cost.price_basis, v.cost.attribution_rule)}))
    return "\n".join(lines) + "\n"


def _budget_cell(budget: BudgetStatus | None) -> str:
    if budget is None:
        return "no budget"
    if budget.monthly_usd is None:
        return f"⚠️ cannot check (unknown prices) vs {usd(budget.budget_usd)}"
    icon = ("❌" if budget.on_exceed == "fail" else "⚠️") if budget.over else "✅"
    return f"{icon} {budget.monthly_usd / budget.budget_usd:.0%} of {usd(budget.budget_usd)} ({budget.basis})"


def _problems_md(violations: Sequence[str], unknown: Sequence[str]) -> list[str]:
    out = [f"- ❌ policy: {v}" for v in violations] + [f"- ⚠️ unknown price: {u}" for u in unknown]
    return ["", *out] if out else []


def _assumptions_md(assumptions: Sequence[str]) -> list[str]:
    return ["", "<details><summary>How these figures are computed</summary>", "",
            *(f"- {a}" for a in assumptions), "", "</details>"]


def render_diff_markdown(diff: FleetDiff) -> str:
    total = diff.delta_desired
    headline = "cost unknown" if total is None else (
        f"{usd(total, signed=True)} USD/month across {len(diff.environments)} environment(s)")
    over = [e.environment for e in diff.environments if e.budget is not None and e.budget.over]
    failing = [e.environment for e in diff.environments if e.violations]
    headline += (f" — ❌ over budget: {', '.join(over)}" if over else "") + (
        f" — ❌ policy: {', '.join(failing)}" if failing else "")
    lines = [COMMENT_MARKER, f"### modelfleet cost: {headline}", "",
             f"`{diff.head}` against `{diff.base}`, USD per month at desired replicas.", "",
             "| environment | before | after | change | budget |", "|---|---:|---:|---:|---|"]
    for env in diff.environments:
        lines.append(f"| {env.environment} | {usd(_desired(env.before))} | {usd(_desired(env.after))} | "
                     f"{_change_cell(env)} | {_budget_cell(env.budget)} |")
    for env in diff.environments:
        lines += _environment_md(env)
    lines += _assumptions_md(diff.assumptions)
    return "\n".join(lines) + "\n"


def _change_cell(env: EnvironmentDiff) -> str:
    if env.delta is None or env.before is None:
        return "unknown"
    if abs(env.delta.desired) < 0.005:
        return "no change"
    percent = f" ({env.delta.desired / env.before.desired:+.1%})" if env.before.desired else ""
    return f"**{usd(env.delta.desired, signed=True)}{percent}**"


def _environment_md(env: EnvironmentDiff) -> list[str]:
    if not env.changes and not env.violations and not env.unknown:
        return []
    lines = ["", f"#### {env.environment}", ""]
    if env.changes:
        lines += ["| model | change | USD/month after | unit cost at peak | why |", "|---|---:|---:|---|---|"]
        lines += [_change_row(c) for c in env.changes]
    extra = [f"- node group {n}" for n in env.node_groups]
    if env.delta is not None and env.changes:
        extra.append(f"- at min / max replicas: {_minmax(env.delta)}")
    lines += (["", *extra] if extra else []) + _problems_md(env.violations, env.unknown)
    return lines


def _change_row(change: ModelChange) -> str:
    label = f"`{change.name}`" + ("" if change.status == "changed" else f" ({change.status})")
    why = "; ".join(change.reasons) + f" — {change.layout}"
    unit = "-" if change.status == "removed" else _unit(change.unit_cost)
    return f"| {label} | {usd(change.delta_usd, signed=True)} | {usd(change.after_usd)} | {unit} | {why} |"


# ---------------------------------------------------------------------------------------------- json
def render_cost_json(views: Sequence[CostView]) -> str:
    data = {v.cost.environment: {**v.cost.model_dump(mode="json"),
                                 "budget": None if v.budget is None else {**v.budget.model_dump(mode="json"),
                                                                          "over": v.budget.over},
                                 "policy_violations": list(v.violations)} for v in views}
    return _dumps({"environments": data})


def render_diff_json(diff: FleetDiff) -> str:
    data = diff.model_dump(mode="json")
    data["delta_desired_usd"] = diff.delta_desired
    return _dumps(data)


def _dumps(data: Any) -> str:
    return json.dumps(round_floats(data), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def round_floats(data: Any, key: str = "") -> Any:
    """Cents for money; node-hour prices as published; unit costs to six significant digits."""
    if isinstance(data, dict):
        return {k: round_floats(v, k) for k, v in data.items()}
    if isinstance(data, (list, tuple)):
        return [round_floats(v, key) for v in data]
    if isinstance(data, float) and key not in EXACT_KEYS:
        return float(f"{data:.6g}") if key in SIGNIFICANT_KEYS else round(data, 2)
    return data
