"""``modelfleet explore MODEL --stack S``: what each latency costs for one model (cost/explore.py), as a table,
JSON, or a drawing (``--plot``, matplotlib from the ``plot`` extra, imported here only)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from ..cost.explore import Exploration, ExplorePoint, explore_model
from ..errors import Issue, SpecError
from ..spec.models import MAX_TPOT_MS, LlmModelSpec
from . import add_project_arguments, project_from

NAME = "explore"
HELP = ("the cost/latency frontier of one model: every precision (LLM) or device and batch size (classic) "
        "planned at a range of p99 targets, priced as `cost` prices them, the current plan marked")
PLOT_FORMATS = (".svg", ".png")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL", help="a model of models.yaml")
    add_project_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print every point planned, as JSON")
    parser.add_argument("--plot", metavar="FILE.svg|png", default=None,
                        help="draw the frontier: cost against p99 latency, one series per precision or device "
                             "(needs the plot extra: pip install 'modelfleet[plot]')")
    parser.add_argument("--all", action="store_true", help="list every point planned, not the frontier only")
    parser.add_argument("--tpot-ms", type=float, default=None, metavar="MS",
                        help="an LLM's frontier at this p99 TPOT instead of the declared one")


def run(args: argparse.Namespace) -> int:
    project = project_from(args)
    fleet = project.fleet()
    names = [m.name for m in fleet.models]
    if args.model not in names:
        raise SpecError([Issue("", 0, 0, "MODEL", f"no model named {args.model!r} in {project.models_path}",
                               f"use one of: {', '.join(sorted(names))}")])
    if args.plot and os.path.splitext(args.plot)[1].lower() not in PLOT_FORMATS:
        raise SpecError([Issue("", 0, 0, "--plot", f"{args.plot}: draws .svg or .png only", "name a .svg or .png file")])
    env = project.environment(args.stack)
    started = time.monotonic()
    llm = isinstance(fleet.model(args.model), LlmModelSpec)
    if args.tpot_ms is not None and not (1 <= args.tpot_ms <= MAX_TPOT_MS and llm):
        raise SpecError([Issue("", 0, 0, "--tpot-ms", f"{args.tpot_ms:g}: a p99 TPOT for an LLM, 1 to {MAX_TPOT_MS:,} ms",
                               "drop --tpot-ms for a classic model, or give one in range")])
    found = explore_model(fleet, env, project.catalogue(), args.model, args.tpot_ms)
    elapsed = time.monotonic() - started
    if found.current is None and not found.points:
        raise SpecError([Issue("", 0, 0, args.model, f"{args.model} is not served in {args.stack}, or no plan of it "
                               "compiles alone", f"run `modelfleet plan --stack {args.stack} --model {args.model}`")])
    sys.stdout.write(json.dumps(found.model_dump(mode="json"), indent=2, sort_keys=True) + "\n" if args.json
                     else format_exploration(found, every=args.all))
    if args.plot:
        draw_frontier(found, args.plot)
        print(f"wrote {args.plot}", file=sys.stderr)
    # the time on stderr: stdout stays byte-identical run to run
    print(f"explore: {len(found.points)} plans in {elapsed:.2f} s", file=sys.stderr)
    return 0


def format_exploration(found: Exploration, every: bool = False) -> str:
    shown = found.points if every else found.frontier
    lines = [f"{found.model} in {found.environment}: monthly cost against the {found.latency}; the SLA says "
             f"{found.sla_p99_ms:g} ms", ""]
    lines += _current_lines(found)
    title = "every plan" if every else "frontier (no other plan is both cheaper and faster)"
    lines += ["", f"{title}, {len(shown)} of {len(found.points)} plans:",
              f"  {'p99 ms':>9} {'sla ms':>9} {'USD/month':>12}  {'series':28} {'instance':14} layout"]
    for p in sorted(shown, key=lambda p: (p.p99_ms, p.monthly_usd, p.series)):
        current = found.current
        mark = " <- current" if current is not None and (p.p99_ms, p.monthly_usd, p.series) == (
            current.p99_ms, current.monthly_usd, current.series) else ""
        meets = "" if p.p99_ms <= found.sla_p99_ms else "  (misses the SLA)"
        lines.append(f"  {p.p99_ms:>9,.1f} {p.sla_p99_ms:>9,g} {p.monthly_usd:>12,.2f}  {p.series:28} "
                     f"{p.instance_type:14} {p.layout}{meets}{mark}")
    if found.left_out:
        lines.append(f"  ({found.left_out} targets gave no plan: too tight, or a stack policy forbids the plan)")
    lines += ["", "basis:", *(f"  - {b}" for b in found.basis)]
    return "\n".join(lines) + "\n"


def _current_lines(found: Exploration) -> list[str]:
    current = found.current
    if current is None:
        return ["current: the declared entry does not compile alone"]
    lines = [f"current: {current.series} on {current.instance_type} ({current.layout}): p99 {current.p99_ms:,.1f} "
             f"ms, {current.monthly_usd:,.2f} USD/month" + (", on the frontier" if current.frontier else
                                                           ", above the frontier")]
    within = [p for p in found.frontier if p.p99_ms <= found.sla_p99_ms]
    best = min(within, key=lambda p: (p.monthly_usd, p.p99_ms)) if within else None
    if best is not None and best.monthly_usd < current.monthly_usd - 0.005:
        lines.append(f"  cheapest within the SLA: {best.series} on {best.instance_type} ({best.layout}), p99 "
                     f"{best.p99_ms:,.1f} ms, {best.monthly_usd:,.2f} USD/month: "
                     f"{current.monthly_usd - best.monthly_usd:,.2f} USD/month less")
    elif not current.frontier:
        faster = min((p for p in found.frontier if p.monthly_usd <= current.monthly_usd),
                     key=lambda p: (p.p99_ms, p.monthly_usd))
        lines.append(f"  the same cost buys p99 {faster.p99_ms:,.1f} ms: {faster.series} on {faster.instance_type} "
                     f"({faster.layout}), planned for {faster.sla_p99_ms:g} ms")
    return lines


def draw_frontier(found: Exploration, path: str) -> None:
    """Cost (y) against p99 latency (x, log), a line per series through its own non-dominated plans, the
    overall frontier as a step line, the SLA as a vertical line and the current plan as a star."""
    import matplotlib  # the plot extra: only this command needs it
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker
    matplotlib.rcParams["svg.hashsalt"] = "modelfleet"  # the same SVG ids every run
    figure, axes = plt.subplots(figsize=(9, 5.5))
    for series in sorted({p.series for p in found.points}):
        own = _own_frontier([p for p in found.points if p.series == series])
        axes.plot([p.p99_ms for p in own], [p.monthly_usd for p in own], marker="o", markersize=3, linewidth=1,
                  label=series, alpha=0.8)
    front = found.frontier
    axes.step([p.p99_ms for p in front], [p.monthly_usd for p in front], where="post", color="black",
              linewidth=1.5, label="frontier")
    axes.axvline(found.sla_p99_ms, color="red", linestyle="--", linewidth=1, label=f"SLA {found.sla_p99_ms:g} ms")
    if found.current is not None:
        axes.plot([found.current.p99_ms], [found.current.monthly_usd], marker="*", markersize=14, color="gold",
                  markeredgecolor="black", linestyle="none", label="current plan")
    axes.set_xscale("log")
    axes.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda value, _: f"{value:,g}"))
    axes.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    axes.set_xlabel(found.latency)
    axes.set_ylabel("USD per month (desired replicas)")
    axes.set_title(f"{found.model} in {found.environment}")
    axes.grid(True, which="both", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    metadata = {"Date": None} if path.lower().endswith(".svg") else {"Software": None}
    figure.savefig(path, metadata=metadata)
    plt.close(figure)


def _own_frontier(points: list[ExplorePoint]) -> list[ExplorePoint]:
    best, out = float("inf"), []
    for p in sorted(points, key=lambda p: (p.monthly_usd, p.p99_ms)):
        if p.p99_ms < best:
            out.append(p)
            best = p.p99_ms
    return sorted(out, key=lambda p: p.p99_ms)
