"""Formatting cost previews and cost diffs as text (terminals), markdown (PR comments) and JSON (tools).

Pure: values in, strings out. Money is shown to the cent with thousands separators; JSON keys are sorted
and floats rounded to the cent (node-hour prices and unit costs keep their precision).

Marks, the same in every format: ❌ the stack's `render` (and so `pulumi up`) fails: it does not compile,
breaks a policy, or is over (or cannot check) a budget in `fail` mode; ⚠️ a warning that does not stop
the deploy (a budget in `warn` mode, an under-provisioned model, an unknown price); ✅ within budget.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .canary import canary_text
from .diff import CENT, CostCause, EnvironmentDiff, FleetDiff, ModelChange
from .diff import usd as format_usd
from ..plan.types import LlmEstimatesPlan
from .fleet import FleetCost, ModelCost, MonthlyUsd, NodeGroupCost, UnitCost
from .policy import BudgetStatus

COMMENT_MARKER = "<!-- modelfleet-cost -->"  # the PR workflow updates the one comment carrying it
UNIT_LABELS = {"usd_per_1k_inferences": "per 1,000 inferences", "usd_per_million_tokens": "per million tokens"}
EXACT_KEYS = {"usd_per_node_hour"}  # volume_usd_per_node_month is money: cents
SIGNIFICANT_KEYS = {"value"}
MAX_DETAILS = 6  # what changed in a stack file or the price table, per cause; more are counted


@dataclass(frozen=True)
class CostView:
    """One environment as the cost command shows it: its cost and guardrail results, or why it failed."""

    environment: str
    cost: FleetCost | None  # None: it does not compile (see errors)
    budget: BudgetStatus | None
    violations: tuple[str, ...]
    errors: tuple[str, ...] = ()


def usd(value: float | None, signed: bool = False) -> str:
    return "unknown" if value is None else format_usd(value, signed)


def _range(m: MonthlyUsd | None) -> str:
    return "unknown" if m is None else f"{usd(m.min)} / {usd(m.desired)} / {usd(m.max)}"


def _unit(unit: UnitCost | None, warn: str = "⚠️") -> str:
    if unit is None:
        return "-"
    short = f" {warn} {unit.shortfall}" if unit.shortfall else ""
    return f"{_unit_figure(unit)} at {unit.basis}{short}{_unmeasured(unit, warn)}"


def _unmeasured(unit: UnitCost | None, warn: str = "⚠️") -> str:
    """The mark of a model whose speed nobody measured: its replicas (so its cost) rest on an assumption."""
    if unit is None or unit.unmeasured is None:
        return ""
    return (f" {warn} UNMEASURED speed: its replicas rest on an execution budget floored by the datasheet bound, "
            "not on a profile (`modelfleet profile`)")


def _unit_figure(unit: UnitCost) -> str:
    if unit.value is None:  # nothing served: the shortfall says why
        return f"no finite USD {UNIT_LABELS[unit.metric]}"
    return f"USD {significant(unit.value)} {UNIT_LABELS[unit.metric]}"


def speed(estimates: LlmEstimatesPlan | None) -> str:
    """An LLM's predicted speed at peak, short enough for a table cell, with what it rests on."""
    if estimates is None:
        return "-"
    e = estimates
    return (f"TTFT p99 {e.ttft_p99_ms:,.0f} ms, TPOT {e.tpot_ms:.1f} ms at {e.sequences_per_replica} seq, "
            f"{e.output_tokens_per_s_per_replica:,.0f} tok/s per replica ({e.input_tokens:,} in / {e.output_tokens:,} "
            f"out; {short_source(e.source)})")


def short_source(source: str) -> str:
    """The calibration (database and fit date) or the datasheet GPU, without the efficiencies' provenance."""
    return source.split(", with the efficiencies")[0]


def significant(value: float, digits: int = 3) -> str:
    """Three significant digits without scientific notation: 0.0000423, 0.00121, 12.1, 127."""
    if value == 0:
        return "0"
    places = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{places}f}"


def _budget_line(budget: BudgetStatus | None) -> str:
    if budget is None:
        return "budget: none set (modelfleet:budget)"
    return f"budget: {budget.describe()} [{budget.verdict}]"


def _blocked(envs: Sequence[tuple[str, BudgetStatus | None, Sequence[str], Sequence[str]]]) -> list[str]:
    """Headline problems: (environment, budget, violations, errors) -> "❌ does not compile: dev", ..."""
    kinds = [("❌ does not compile", [e for e, _, _, errors in envs if errors]),
             ("❌ over budget", [e for e, b, _, _ in envs if b is not None and b.blocks and b.over]),
             ("❌ budget cannot be checked", [e for e, b, _, _ in envs if b is not None and b.blocks and b.unknown]),
             ("❌ policy", [e for e, _, violations, _ in envs if violations]),
             ("⚠️ over budget (warn only)", [e for e, b, _, _ in envs if b is not None and b.over and not b.blocks])]
    return [f"{label}: {', '.join(names)}" for label, names in kinds if names]


# ---------------------------------------------------------------------------------------------- text
def render_cost_text(views: Sequence[CostView]) -> str:
    return "\n".join(_environment_text(v) for v in views)


def _environment_text(view: CostView) -> str:
    c = view.cost
    if c is None:
        return "\n".join([f"{view.environment}: DOES NOT COMPILE", *(f"  ERROR: {e}" for e in view.errors), ""])
    lines = [f"{c.environment}: {c.region}, {c.pricing}; monthly = {c.hours_per_month:g} h",
             *(f"  prices: {b}" for b in c.price_basis), "",
             f"  {'node group':28} {'instance':14} {'USD/h/node':>10}  {'nodes':9} USD/month min / desired / max"]
    lines += [_group_row(g.name, g) for g in c.node_groups] + _cluster_rows(c)
    lines += [f"  {'total':28} {'':14} {'':>10}  {'':9} {_range(c.monthly_usd)}",
              "", f"  {'model':28} {'GPUs':9} {'USD/month min / desired / max':38} unit cost at peak"]
    for m in c.models:
        lines += _model_text(m)
    lines += ["", f"  {'team':28} {'models':9} USD/month min / desired / max"]
    lines += [f"  {t.name:28} {len(t.models):<9} {_range(t.monthly_usd)}" for t in c.teams]
    lines += [""] + [f"  {canary_text(k)}" for k in c.canaries] if c.canaries else []
    lines += ["", f"  {_budget_line(view.budget)}"]
    lines += [f"  POLICY: {v}" for v in view.violations] + [f"  UNKNOWN: {u}" for u in c.unknown]
    lines += ["", f"  rule: {c.attribution_rule}", ""]
    return "\n".join(lines)


def _group_row(label: str, g: NodeGroupCost) -> str:
    price = "unknown" if g.usd_per_node_hour is None else f"{g.usd_per_node_hour:.8g}"
    return "\n".join([
        f"  {label:28} {g.instance_type:14} {price:>10}  {'-'.join(map(str, g.nodes)):9} {_range(g.monthly_usd)}",
        f"  {'':28}   + per node and month: {_volume(g)}"])


def _volume(g: NodeGroupCost) -> str:
    """Each node's EBS volume and its monthly price: ``200 GiB gp3 at 3000 IOPS, 125 MiB/s = 16.00 USD EBS``."""
    return f"{g.volume} = {usd(g.volume_usd_per_node_month)} USD EBS"


def _cluster_rows(c: FleetCost) -> list[str]:
    """The EKS control plane and the system node group, when the stack creates its cluster."""
    if c.system_nodes is None and c.control_plane_monthly_usd is None:
        return ["  EKS control plane and system nodes: not created by this stack (modelfleet:cluster.create: false)"]
    control = "unknown" if c.control_plane_monthly_usd is None else f"{usd(c.control_plane_monthly_usd)} every month"
    rows = [f"  {'EKS control plane':28} {control}"]
    return rows + ([_group_row("system nodes (on-demand)", c.system_nodes)] if c.system_nodes else [])


def _cluster_md(c: FleetCost) -> list[str]:
    if c.system_nodes is None:
        return []
    g = c.system_nodes
    price = "unknown" if g.usd_per_node_hour is None else f"{g.usd_per_node_hour:.8g}"
    return [f"- cluster created by this stack: EKS control plane {usd(c.control_plane_monthly_usd)}; system nodes "
            f"{'-'.join(map(str, g.nodes))} x {g.instance_type} on-demand at {price} USD/h, each with "
            f"{_volume(g)} a month: {_range(g.monthly_usd)} USD/month (min / desired / max)"]


def saving_text(m: ModelCost) -> str | None:
    """A CPU model's cost against its GPU placement, at desired replicas; None for a GPU model."""
    if m.device != "cpu":
        return None
    if m.gpu_alternative_monthly_usd is None:
        return "on KIND_CPU instances; no GPU placement holds it within its SLA"
    saving = m.saving_monthly_usd
    verdict = ("unknown" if saving is None else f"saves {usd(saving)}" if saving >= 0 else f"costs {usd(-saving)} more")
    return (f"on KIND_CPU instances: {verdict} USD/month against its GPU placement (the GPUs would add "
            f"{usd(m.gpu_alternative_monthly_usd)} USD/month)")


def _model_text(m: ModelCost) -> list[str]:
    gpus = "CPU" if m.device == "cpu" else "-".join(map(str, m.gpus))
    unit = "-" if m.unit_cost is None else _unit_figure(m.unit_cost)
    out = [f"  {m.name:28} {gpus:9} {_range(m.monthly_usd):38} {unit}",
           f"  {'':28}   {m.serving} on {m.instance_type}: {m.attribution}"]
    if m.estimates is not None:
        out.append(f"  {'':28}   speed at peak (predicted): {speed(m.estimates)}")
    saving = saving_text(m)
    if saving:
        out.append(f"  {'':28}   {saving}")
    if m.unit_cost is not None:
        out.append(f"  {'':28}   throughput: {m.unit_cost.assumption}")
        if m.unit_cost.unmeasured:
            out.append(f"  {'':28}   speed: {m.unit_cost.unmeasured}")
        if m.unit_cost.shortfall:
            priced = "" if m.unit_cost.value is None else "; the unit cost is at what they serve"
            out.append(f"  {'':28}   WARNING: {m.unit_cost.shortfall}{priced}")
    return out


def render_diff_text(diff: FleetDiff) -> str:
    lines = [f"cost change: {diff.base} -> {diff.head} (USD per month at desired replicas)",
             *(f"  WARNING: {c}" for c in diff.caveats), *(f"  base {s}" for s in diff.sources), ""]
    for env in diff.environments:
        lines += _environment_diff_text(env) + [""]
    lines += ["assumptions:"] + [f"  - {a}" for a in diff.assumptions]
    return "\n".join(lines) + "\n"


def _environment_diff_text(env: EnvironmentDiff) -> list[str]:
    lines = [f"{_env_label(env)}: {_side_text(env.before, env.base_errors)} -> {_side_text(env.after, env.errors)} "
             f"({usd(_desired(env.delta), signed=True)}); min/max change {_minmax(env.delta)}"]
    lines += [f"  ERROR: {e}" for e in env.errors] + [f"  base does not compile: {e}" for e in env.base_errors]
    lines += [f"  cause {_cause_text(c)}" for c in _shown_causes(env)]
    for change in env.changes:
        lines.append(f"  {change.status:8} {change.name:28} {usd(change.delta_usd, signed=True):>14}  {change.layout}")
        lines += [f"  {'':8} {'':28} {'':>14}  - {r}" for r in change.reasons]
        if change.estimates is not None:
            lines.append(f"  {'':8} {'':28} {'':>14}  speed at peak (predicted): {speed(change.estimates)}")
        if change.unit_cost is not None and change.unit_cost.shortfall:
            lines.append(f"  {'':8} {'':28} {'':>14}  WARNING: {change.unit_cost.shortfall}")
        if change.unit_cost is not None and change.unit_cost.unmeasured:
            lines.append(f"  {'':8} {'':28} {'':>14}  {change.unit_cost.unmeasured}")
        lines += [f"  {'':8} {'':28} {'':>14}  cheaper: {c}" for c in change.cheaper]
    lines += [f"  node group {n}" for n in env.node_groups] + [f"  cluster: {n}" for n in env.cluster]
    lines += [f"  team {t.name}: {_team_side(t.before_usd)} -> {_team_side(t.after_usd)} "
              f"({usd(t.delta_usd, signed=True)})" for t in env.teams]
    lines += [f"  NOTE: {n}" for n in env.notes]
    if env.after is not None and not env.errors and env.presence != "removed":
        lines += [f"  {_budget_line(env.budget)}"]
    return lines + [f"  POLICY: {v}" for v in env.violations] + [f"  UNKNOWN: {u}" for u in env.unknown]


def _team_side(value: float | None) -> str:
    return "-" if value is None else usd(value)


def _side_text(total: MonthlyUsd | None, errors: Sequence[str]) -> str:
    return "DOES NOT COMPILE" if errors else usd(_desired(total))


def _cause_text(cause: CostCause) -> str:
    details = list(cause.details[:MAX_DETAILS]) + (
        [f"and {len(cause.details) - MAX_DETAILS} more"] if len(cause.details) > MAX_DETAILS else [])
    what = f" ({'; '.join(details)})" if details else ""
    effect = "no cost change" if cause.delta is not None and abs(cause.delta.desired) < CENT else (
        f"{usd(_desired(cause.delta), signed=True)} at desired")
    return f"{cause.cause}: {effect}{what}"


def _shown_causes(env: EnvironmentDiff) -> tuple[CostCause, ...]:
    """Causes are shown when something besides models.yaml changed (else the rows say it all)."""
    return env.causes if any(c.cause != "models.yaml" for c in env.causes) else ()


def _env_label(env: EnvironmentDiff) -> str:
    stack = {"added": "new stack; ", "removed": "stack removed; "}.get(env.presence, "")
    return f"{env.environment} ({stack}{env.pricing})"


def _desired(m: MonthlyUsd | None) -> float | None:
    return None if m is None else m.desired


def _minmax(m: MonthlyUsd | None) -> str:
    return "unknown" if m is None else f"{usd(m.min, signed=True)} / {usd(m.max, signed=True)}"


# ---------------------------------------------------------------------------------------------- markdown
def render_cost_markdown(views: Sequence[CostView]) -> str:
    problems = _blocked([(v.environment, v.budget, v.violations, v.errors) for v in views])
    lines = [COMMENT_MARKER, "### modelfleet cost preview" + "".join(f" — {p}" for p in problems), "",
             "| environment | USD/month (min / desired / max) | budget |", "|---|---:|---|"]
    for v in views:
        label = v.environment if v.cost is None else f"{v.environment} ({v.cost.pricing})"
        figures = "❌ does not compile" if v.cost is None else _range(v.cost.monthly_usd)
        lines.append(f"| {label} | {figures} | {_budget_cell(v.budget)} |")
    for v in views:
        lines += ["", f"#### {v.environment}", ""] + _preview_section_md(v)
    costs = [v.cost for v in views if v.cost is not None]
    lines += _assumptions_md(sorted({a for c in costs for a in (*c.price_basis, c.attribution_rule)}))
    return "\n".join(lines) + "\n"


def _preview_section_md(view: CostView) -> list[str]:
    if view.cost is None:
        return [f"- ❌ {e}" for e in view.errors]
    lines = ["| model | runs on | USD/month desired | unit cost at peak | LLM speed at peak (predicted) |",
             "|---|---|---:|---|---|"]
    lines += [f"| `{m.name}` | {m.instance_type}{' (KIND_CPU)' if m.device == 'cpu' else ''} | "
              f"{usd(m.monthly_usd.desired if m.monthly_usd else None)} | {_unit(m.unit_cost)} | {speed(m.estimates)} |"
              for m in view.cost.models]
    savings = [f"- `{m.name}` {saving_text(m)}" for m in view.cost.models if saving_text(m)]
    lines += ["", *savings] if savings else []
    lines += ["", "| team | models | USD/month desired |", "|---|---|---:|"]
    lines += [f"| {t.name} | {', '.join(f'`{m}`' for m in t.models)} | "
              f"{usd(t.monthly_usd.desired if t.monthly_usd else None)} |" for t in view.cost.teams]
    cluster = _cluster_md(view.cost)
    return lines + (["", *cluster] if cluster else []) + _problems_md(view.violations, view.cost.unknown)


def _problems_md(violations: Sequence[str], unknown: Sequence[str]) -> list[str]:
    out = [f"- ❌ policy: {v}" for v in violations] + [f"- ⚠️ unknown price: {u}" for u in unknown]
    return ["", *out] if out else []


def _budget_cell(budget: BudgetStatus | None) -> str:
    if budget is None:
        return "no budget"
    icon = "✅" if budget.passes else "❌" if budget.blocks else "⚠️"
    effect = "" if budget.passes else ": the render fails" if budget.blocks else " (onExceed: warn)"
    if budget.monthly_usd is None:
        return f"{icon} cannot check (prices unknown) vs {usd(budget.budget_usd)}{effect}"
    return f"{icon} {budget.monthly_usd / budget.budget_usd:.0%} of {usd(budget.budget_usd)} ({budget.basis}){effect}"


def _assumptions_md(assumptions: Sequence[str]) -> list[str]:
    return ["", "<details><summary>How these figures are computed</summary>", "",
            *(f"- {a}" for a in assumptions), "", "</details>"]


def render_diff_markdown(diff: FleetDiff) -> str:
    total = diff.delta_desired
    headline = "cost unknown" if total is None else (
        f"{usd(total, signed=True)} USD/month across {len(diff.environments)} environment(s)")
    problems = _blocked([(e.environment, e.budget, e.violations, e.errors) for e in diff.environments])
    assumed = [e.environment for e in diff.environments if "assumed" in e.pricing]
    spot = f"; {', '.join(assumed)} at assumed spot prices (see the row)" if assumed else ""
    lines = [COMMENT_MARKER, f"### modelfleet cost: {headline}" + "".join(f" — {p}" for p in problems), "",
             f"`{diff.head}` against `{diff.base}`, USD per month at desired replicas{spot}.", "",
             *(line for c in diff.caveats for line in (f"> ⚠️ {c}", "")),
             "| environment | before | after | change | budget |", "|---|---:|---:|---:|---|"]
    for env in diff.environments:
        lines.append(f"| {_env_label(env)} | {_side_md(env.before, env.base_errors, env.presence == 'added')} | "
                     f"{_side_md(env.after, env.errors, env.presence == 'removed')} | {_change_cell(env)} | "
                     f"{'-' if env.errors or env.presence == 'removed' else _budget_cell(env.budget)} |")
    for env in diff.environments:
        lines += _environment_md(env)
    lines += _assumptions_md([*(f"base {s}" for s in diff.sources), *diff.assumptions])
    return "\n".join(lines) + "\n"


def _side_md(total: MonthlyUsd | None, errors: Sequence[str], absent: bool) -> str:
    return "—" if absent else "❌ does not compile" if errors else usd(_desired(total))


def _change_cell(env: EnvironmentDiff) -> str:
    if env.delta is None or env.before is None:
        return "unknown"
    if abs(env.delta.desired) < 0.005:
        return "no change"
    percent = f" ({env.delta.desired / env.before.desired:+.1%})" if env.before.desired else ""
    return f"**{usd(env.delta.desired, signed=True)}{percent}**"


def _environment_md(env: EnvironmentDiff) -> list[str]:
    causes = _shown_causes(env)
    head = [f"- ❌ {e}" for e in env.errors] + [f"- base does not compile: {e}" for e in env.base_errors]
    head += [f"- {_cause_text(c)}" for c in causes]
    table = ["| model | change | USD/month after | unit cost at peak | LLM speed at peak (predicted) | why |",
             "|---|---:|---:|---|---|---|"]
    table = table + [_change_row(c) for c in env.changes] if env.changes else []
    teams = ["| team | before | after | change |", "|---|---:|---:|---:|"] + [
        f"| {t.name} | {_team_side(t.before_usd)} | {_team_side(t.after_usd)} | {usd(t.delta_usd, signed=True)} |"
        for t in env.teams] if env.teams else []
    extra = [f"- node group {n}" for n in env.node_groups] + [f"- cluster: {n}" for n in env.cluster]
    if env.delta is not None and env.changes:
        extra.append(f"- at min / max replicas: {_minmax(env.delta)}")
    extra += [f"- ⚠️ {n}" for n in env.notes]
    problems = [f"- ❌ policy: {v}" for v in env.violations] + [f"- ⚠️ unknown price: {u}" for u in env.unknown]
    blocks = [block for block in (head, table, teams, extra, problems) if block]
    if not blocks:
        return []
    lines = ["", f"#### {env.environment}"]
    for block in blocks:
        lines += ["", *block]
    return lines


def _change_row(change: ModelChange) -> str:
    label = f"`{change.name}`" + ("" if change.status == "changed" else f" ({change.status})")
    why = "; ".join(change.reasons) + f" — {change.layout}" + (
        f" — 💡 cheaper: {'; '.join(change.cheaper)}" if change.cheaper else "")
    unit = "-" if change.status == "removed" else _unit(change.unit_cost)
    fast = "-" if change.status == "removed" else speed(change.estimates)
    return f"| {label} | {usd(change.delta_usd, signed=True)} | {usd(change.after_usd)} | {unit} | {fast} | {why} |"


# ---------------------------------------------------------------------------------------------- json
def render_cost_json(views: Sequence[CostView]) -> str:
    data = {v.environment: _view_json(v) for v in views}
    return _dumps({"environments": data})


def _view_json(view: CostView) -> dict[str, Any]:
    if view.cost is None:
        return {"errors": list(view.errors)}
    return {**view.cost.model_dump(mode="json"), "pricing": view.cost.pricing, "budget": _budget_json(view.budget),
            "policy_violations": list(view.violations), "errors": []}


def render_diff_json(diff: FleetDiff) -> str:
    data = diff.model_dump(mode="json")
    data["delta_desired_usd"] = diff.delta_desired
    for env, out in zip(diff.environments, data["environments"]):
        out["budget"] = _budget_json(env.budget)
    return _dumps(data)


def _budget_json(budget: BudgetStatus | None) -> dict[str, Any] | None:
    if budget is None:
        return None
    return {**budget.model_dump(mode="json"), "over": budget.over, "blocks": budget.blocks, "verdict": budget.verdict}


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
