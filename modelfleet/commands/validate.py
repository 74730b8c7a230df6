"""``modelfleet validate``: every problem `plan` or `render` would stop on, in every stack, at once.

Checking the catalogue and the stack files alone is not enough: a valid catalogue can still be impossible
to place (no layout meets a latency), break a stack's policy, or exceed a budget in ``fail`` mode. So every
stack is compiled with its guardrails, as `plan` does. A problem found in several stacks is said once, with
the stacks it is in; the last line says which stacks compile and which do not.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

from ..errors import EXIT_USER_ERROR, Issue, ModelfleetError
from . import add_project_arguments, project_from

NAME = "validate"
HELP = ("check models.yaml and every stack file, and compile every stack with its policies and budget: "
        "every problem `plan` would refuse, with its line")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser, stack=False)


def run(args: argparse.Namespace) -> int:
    project = project_from(args)
    stacks = project.stacks()
    try:
        fleet = project.fleet()
    except ModelfleetError as exc:
        return _report({i: () for i in exc.issues}, f"no stack was compiled ({', '.join(stacks)}): "
                                                       f"{project.models_path} must be valid first")
    found: dict[Issue, list[str]] = {}
    for stack in stacks:
        try:
            project.plan(stack)
        except ModelfleetError as exc:
            for issue in exc.issues:
                found.setdefault(issue, []).append(stack)
    failed = sorted({s for names in found.values() for s in names})
    if not failed:
        print(f"{project.models_path}: {len(fleet.models)} models valid; every stack compiles: {', '.join(stacks)}")
        return 0
    compiled = [s for s in stacks if s not in failed]
    where = (f"these stacks compile: {', '.join(compiled)}; these do not: {', '.join(failed)}" if compiled
             else f"no stack compiles: {', '.join(failed)}")
    return _report({issue: tuple(names) for issue, names in found.items()}, where)


def _report(issues: dict[Issue, tuple[str, ...]], where: str) -> int:
    for issue, stacks in sorted(issues.items()):
        print(_in_stacks(issue, stacks), file=sys.stderr)
    print(f"validate: {len(issues)} problem(s); {where}", file=sys.stderr)
    return EXIT_USER_ERROR


def _in_stacks(issue: Issue, stacks: tuple[str, ...]) -> Issue:
    if not stacks:
        return issue
    tag = f"in stack {stacks[0]}: " if len(stacks) == 1 else f"in stacks {', '.join(stacks)}: "
    return dataclasses.replace(issue, message=tag + issue.message)
