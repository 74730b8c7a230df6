"""``modelfleet cost``: the cost preview, or with ``--base`` the cost change, of every stack or the named ones.

The report is always written, failing stacks included (as ❌ with their errors), so the PR comment is
never stale; the exit code then tells CI what happened:

    0  every stack compiled (and nothing ``--fail-on`` names blocks a deploy)
    2  a stack of the working tree does not compile (each error on stderr, named by its stack)
    3  with ``--fail-on budget`` / ``policy``: a stack's budget in ``fail`` mode is exceeded or cannot be
       checked (unknown prices), or a policy is broken, i.e. ``render`` / ``pulumi up`` of it would fail.
       A budget in ``warn`` mode never counts: it only warns at deploy time too.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Mapping

from ..cost.diff import StackCost, StackFailure, compute_fleet_diff
from ..cost.report import (
    CostView,
    render_cost_json,
    render_cost_markdown,
    render_cost_text,
    render_diff_json,
    render_diff_markdown,
    render_diff_text,
)
from ..errors import EXIT_USER_ERROR, Issue, SpecError
from . import project_from
from .cost_sources import Side, compare_stack, compiler_caveats, price_stack, read_base, read_head

NAME = "cost"
HELP = ("monthly cost per node group, model and environment (min/desired/max), unit costs at peak, budget and "
        "policy checks; with --base, the change against another models.yaml, stacks/ and price table (a git ref, "
        "a directory or a models.yaml file)")
EXIT_COMPILE_FAILED = EXIT_USER_ERROR  # a stack of the working tree does not compile
EXIT_GUARDRAIL = 3  # only with --fail-on: distinct from 2 so CI can tell them apart
GUARDRAILS = ("budget", "policy")
RENDERERS = {"text": (render_cost_text, render_diff_text), "markdown": (render_cost_markdown, render_diff_markdown),
             "json": (render_cost_json, render_diff_json)}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", action="append", default=None,
                        help="environment (repeatable; default: every stack in stacks/, and with --base the base's)")
    parser.add_argument("--models", default=None, help="catalogue file (default: <project>/models.yaml)")
    parser.add_argument("--prices", default=None, help="instance/price table (default: the shipped one)")
    parser.add_argument("--base", default=None, metavar="REF_OR_PATH",
                        help="compare with a git ref (its models.yaml, stacks/ and, when it is in the repository, "
                             "price table), a directory (models.yaml, stacks/) or a models.yaml file")
    parser.add_argument("--format", choices=sorted(RENDERERS), default="text")
    parser.add_argument("--fail-on", type=_guardrails, default=(), metavar="budget,policy",
                        help=f"exit {EXIT_GUARDRAIL} when a stack breaks these guardrails the way `render` would "
                             "fail on them (budgets in warn mode never count); for CI")


def _guardrails(text: str) -> tuple[str, ...]:
    names = tuple(sorted({n.strip() for n in text.split(",") if n.strip()}))
    unknown = [n for n in names if n not in GUARDRAILS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"use a comma-separated list of {', '.join(GUARDRAILS)}")
    return names


def run(args: argparse.Namespace) -> int:
    project = project_from(args)
    head = read_head(project)
    render_costs, render_diff = RENDERERS[args.format]
    if args.base is None:
        stacks = _selected(args.stack, head)
        priced = {s: price_stack(head, s) for s in stacks}
        sys.stdout.write(render_costs([_view(s, priced[s]) for s in stacks]))
    else:
        base = read_base(project, args.base, head, run_git)
        sides = {s: compare_stack(base, head, s) for s in _selected(args.stack, head, base)}
        priced = {s: c.head for s, c in sides.items() if c.head is not None}
        sys.stdout.write(render_diff(compute_fleet_diff(
            sides, base_label=base.label, head_label=os.path.relpath(project.models_path, project.root),
            sources=base.sources, caveats=compiler_caveats(base))))
    sys.stdout.flush()
    return _exit_code(priced, args.fail_on)


def run_git(root: str, *args: str) -> str | None:
    """``git -C root args...``'s output, or None when git fails (not a repository, no such ref or path)."""
    result = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, check=False)
    return result.stdout if result.returncode == 0 else None


def run_git_bytes(root: str, *args: str) -> bytes | None:
    """As :func:`run_git`, the output as bytes (a binary file at a ref: a warmup sample)."""
    result = subprocess.run(["git", "-C", root, *args], capture_output=True, check=False)
    return result.stdout if result.returncode == 0 else None


def _selected(named: list[str] | None, head: Side, base: Side | None = None) -> tuple[str, ...]:
    known = set(head.stacks) | set(base.stacks if base else ())
    if not named:
        return tuple(sorted(known))
    missing = [s for s in named if s not in known]
    if missing:
        raise SpecError([Issue("", 0, 0, "--stack", f"no stack named {s!r}", f"use one of: {', '.join(sorted(known))}")
                         for s in missing])
    return tuple(dict.fromkeys(named))


def _view(stack: str, priced: StackCost | None) -> CostView:
    if isinstance(priced, StackFailure) or priced is None:
        return CostView(stack, None, None, (), priced.lines() if priced else ())
    return CostView(stack, priced.cost, priced.budget, tuple(str(i) for i in priced.violations))


def _exit_code(priced: Mapping[str, StackCost], fail_on: tuple[str, ...]) -> int:
    """2 when a stack does not compile, else 3 when a guardrail named by --fail-on blocks one, else 0."""
    failures = [p for p in priced.values() if isinstance(p, StackFailure)]
    for failure in failures:
        for line in failure.lines():
            print(line, file=sys.stderr)
    if failures:
        print(f"cost: {len(failures)} stack(s) do not compile: {', '.join(f.stack for f in failures)}; "
              "the report above shows them", file=sys.stderr)
        return EXIT_COMPILE_FAILED
    blocked = []
    for stack, costed in sorted(priced.items()):
        if "budget" in fail_on and costed.budget is not None and costed.budget.blocks:  # type: ignore[union-attr]
            blocked.append(f"{stack}: budget: {costed.budget.describe()}")  # type: ignore[union-attr]
        if "policy" in fail_on:
            blocked += [f"{stack}: policy: {v}" for v in costed.violations]  # type: ignore[union-attr]
    for line in blocked:
        print(line, file=sys.stderr)
    return EXIT_GUARDRAIL if blocked else 0
