"""``modelfleet validate``: every problem `plan` or `render` would stop on, in every stack, at once.

Checking the catalogue and the stack files alone is not enough: a valid catalogue can still be impossible
to place (no layout meets a latency), break a stack's policy, or exceed a budget in ``fail`` mode. So every
stack is compiled with its guardrails, as `plan` does. A problem found in several stacks is said once, with
the stacks it is in; the last line says which stacks compile and which do not.

``--online`` also reads the Hugging Face Hub (engines/hub_client.py; HF_TOKEN for gated repositories): each
LLM's revision, gating and config.json against models.yaml (spec/hub_check.py); a difference is a warning,
a revision the Hub does not have is a problem. Without it, validate says what it would check.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable

from ..engines.hub_client import Fetch, NotFound, read_hub, urllib_fetch
from ..errors import EXIT_USER_ERROR, Issue, ModelfleetError
from ..spec.hub_check import hub_differences, hub_targets
from ..spec.models import FleetSpec, LlmModelSpec
from . import add_project_arguments, project_from

NAME = "validate"
HELP = ("check models.yaml and every stack file, and compile every stack with its policies and budget: "
        "every problem `plan` would refuse, with its line")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser, stack=False)
    parser.add_argument("--online", action="store_true",
                        help="also read each LLM's Hugging Face repository (revision, gating, config.json's dtype and "
                             "figures) and report what differs from models.yaml; HF_TOKEN for gated ones")


def run(args: argparse.Namespace, fetch: Fetch | None = None) -> int:
    """Validate; the Hub read (or what it would check) comes before the last line, which stays the verdict."""
    def hub(fleet: FleetSpec) -> int:
        if getattr(args, "online", False):
            return check_hub(fleet, fetch or urllib_fetch(os.environ.get("HF_TOKEN")))
        return say_hub_checks(fleet)
    return _validate(args, hub)


def say_hub_checks(fleet: FleetSpec) -> int:
    targets = hub_targets(fleet)
    if targets:
        print(f"not checked offline ({len(targets)} Hub checkpoint(s); `validate --online` reads them):")
        for target in targets:
            print(f"  {target.describe()}")
    return 0


def check_hub(fleet: FleetSpec, fetch: Fetch) -> int:
    """Each Hub checkpoint read and compared; 2 when a revision does not exist, else 0 (differences warn)."""
    models = {m.name: m for m in fleet.models}
    code = 0
    for target in hub_targets(fleet):
        model = models[target.model]
        assert isinstance(model, LlmModelSpec)
        try:
            facts = read_hub(target, fetch)
        except NotFound:
            print(f"error: {target.model}: {target.repo}@{target.revision} does not exist on the Hub", file=sys.stderr)
            code = EXIT_USER_ERROR
            continue
        except OSError as exc:
            print(f"warning: {target.model}: the Hub did not answer ({exc}); would check {target.describe()}",
                  file=sys.stderr)
            continue
        found = hub_differences(model, target, facts)
        for line in found:
            print(f"warning: {target.model}: {line}", file=sys.stderr)
        print(f"{target.model}: {target.repo}@{facts.sha[:12]}: " + (f"{len(found)} difference(s)" if found else
                                                                     "agrees with models.yaml"))
    return code


def _validate(args: argparse.Namespace, hub: Callable[[FleetSpec], int]) -> int:
    project = project_from(args)
    stacks = project.stacks()
    try:
        source = project.fleet_source()  # parsed once, for every stack
    except ModelfleetError as exc:
        return _report({i: () for i in exc.issues}, f"no stack was compiled ({', '.join(stacks)}): "
                                                       f"{project.models_path} must be valid first")
    fleet = source[0]
    found: dict[Issue, list[str]] = {}
    for stack in stacks:
        try:
            project.plan_and_cost(stack, source=source)
        except ModelfleetError as exc:
            for issue in exc.issues:
                found.setdefault(issue, []).append(stack)
    failed = sorted({s for names in found.values() for s in names})
    if not failed:  # the Hub is read once the stacks compile (a failing validate prints only its problems)
        code = hub(fleet)
        print(f"{project.models_path}: {len(fleet.models)} models valid; every stack compiles: {', '.join(stacks)}")
        return code
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
