from __future__ import annotations

import argparse
import os
import subprocess
import sys

from ..cost_diff import compute_fleet_diff
from ..cost_report import (CostView, render_cost_json, render_cost_markdown, render_cost_text, render_diff_json,
                           render_diff_markdown, render_diff_text)
from ..errors import Issue, SpecError
from ..project import CostedPlan, FleetSource, Project
from . import project_from

NAME = "cost"
HELP = ("monthly cost per node group, model and environment (min/desired/max), unit costs at peak, budget and "
        "policy checks; with --base, the change against another models.yaml (a git ref or a file)")
EXIT_OVER_BUDGET = 3  # only with --fail-over-budget: distinct from 2 (bad input) so CI can tell them apart
RENDERERS = {"text": (render_cost_text, render_diff_text), "markdown": (render_cost_markdown, render_diff_markdown),
             "json": (render_cost_json, render_diff_json)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", action="append", default=None,
                        help="environment (repeatable; default: every stack in stacks/)")
    parser.add_argument("--models", default=None, help="catalogue file (default: <project>/models.yaml)")
    parser.add_argument("--prices", default=None, help="instance/price table (default: the shipped one)")
    parser.add_argument("--base", default=None, metavar="REF_OR_FILE",
                        help="compare with this models.yaml: a file, or a git ref (git show REF:models.yaml)")
    parser.add_argument("--format", choices=sorted(RENDERERS), default="text")
    parser.add_argument("--fail-over-budget", action="store_true",
                        help=f"exit {EXIT_OVER_BUDGET} when any environment is over its budget (for CI)")


def run(args: argparse.Namespace) -> int:
    project = project_from(args)
    stacks = tuple(args.stack) if args.stack else project.stacks()
    head = {stack: project.costed(stack) for stack in stacks}
    render_costs, render_diff = RENDERERS[args.format]
    if args.base is None:
        sys.stdout.write(render_costs([_view(c) for c in head.values()]))
    else:
        source, label = load_base(project, args.base)
        base = {stack: project.costed(stack, source=source) for stack in stacks}
        diff = compute_fleet_diff(
            {s: (c.plan, c.cost) for s, c in base.items()}, {s: (c.plan, c.cost) for s, c in head.items()},
            {s: c.budget for s, c in head.items()}, {s: _violations(c) for s, c in head.items()},
            base_label=label, head_label=os.path.relpath(project.models_path, project.root))
        sys.stdout.write(render_diff(diff))
    over = sorted(s for s, c in head.items() if c.budget is not None and c.budget.over)
    if over and args.fail_over_budget:
        print(f"over budget: {', '.join(over)}", file=sys.stderr)
        return EXIT_OVER_BUDGET
    return 0


def _violations(costed: CostedPlan) -> tuple[str, ...]:
    return tuple(str(i) for i in costed.violations)


def _view(costed: CostedPlan) -> CostView:
    return CostView(costed.cost, costed.budget, _violations(costed))


def load_base(project: Project, base: str) -> tuple[FleetSource, str]:
    """The base catalogue: a file if one exists at ``base``, else ``git show base:<models.yaml>``."""
    if os.path.isfile(base):
        with open(base, encoding="utf-8") as handle:
            return project.fleet_from_text(handle.read(), base), base
    relative = os.path.relpath(project.models_path, project.root)
    spec = f"{base}:./{relative}"
    result = subprocess.run(["git", "-C", project.root, "show", spec], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["git failed"])[-1]
        raise SpecError([Issue("", 0, 0, "--base", f"{base!r} is not a file, and `git show {spec}` failed: {reason}",
                               "pass a models.yaml file or a git ref that has it (e.g. origin/main; fetch it first)")])
    label = f"{base}:{relative}"
    return project.fleet_from_text(result.stdout, label), label
