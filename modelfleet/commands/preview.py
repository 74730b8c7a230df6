"""``modelfleet preview --stack NAME``: what `pulumi up --stack NAME` would create, without AWS or the CLI."""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..errors import EXIT_USER_ERROR, Issue, SpecError
from ..spec.environment import stack_path
from ..spec.yaml_source import load_yaml
from . import add_project_arguments, project_from

NAME = "preview"
HELP = ("run the Pulumi program under the SDK's mocks and show what `pulumi up` would create (no AWS, no CLI); "
        "with --base, what it would create, update, replace or delete against another branch")
PLACEHOLDER_TOKEN = "hf_offline_preview_placeholder"  # stands in for the stack's encrypted modelfleet:hfToken
HF_TOKEN = "modelfleet:hfToken"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser, stack=False)
    parser.add_argument("--stack", action="append", default=None,
                        help="environment: stacks/Pulumi.<STACK>.yaml (required without --base; with it "
                             "repeatable, default every stack of either side)")
    parser.add_argument("--base", default=None, metavar="REF_OR_PATH",
                        help="compare with the preview of a git ref (its models.yaml, stacks/ and price table), a "
                             "directory (models.yaml, stacks/) or a models.yaml file: what `pulumi up` would create, "
                             "update, replace or delete, node rolls included")
    parser.add_argument("--format", choices=("text", "markdown"), default="text",
                        help="with --base: text, or markdown for the pull-request comment")


def require_program(root: str) -> None:
    """The Pulumi program this command runs: a project of models.yaml and stacks/ alone has none."""
    missing = [name for name in ("__main__.py", "Pulumi.yaml") if not os.path.isfile(os.path.join(root, name))]
    if missing:
        raise SpecError([Issue(os.path.join(root, missing[0].rstrip("/")), 0, 0, "",
                               f"no Pulumi program here: `preview` runs the project's __main__.py (with Pulumi.yaml) "
                               f"under Pulumi's mocks, and {', '.join(missing)} "
                               f"{'is' if len(missing) == 1 else 'are'} missing",
                               "`modelfleet init` writes both (a __main__.py of three lines that runs modelfleet.program); "
                               "`modelfleet plan` and `render` need neither")])


def stand_in_secrets(config: dict) -> dict[str, str]:
    """The stack's secrets the program reads, as stand-ins (they are encrypted in the stack file): only those
    the stack sets, so the program warns about a missing one as `pulumi preview` would."""
    return {HF_TOKEN: PLACEHOLDER_TOKEN} if HF_TOKEN in config else {}


def run_side(root: str, stack: str, side) -> "PreviewResult":  # noqa: F821  (preview.runner, imported late)
    """The program for ``stack`` on one side of ``preview --base`` (commands/preview_base.py's Inputs)."""
    from ..preview.runner import run_program

    config = side.stacks[stack]
    environ = {key: os.path.abspath(path) for key, path in
               (("MODELFLEET_MODELS", side.models_path), ("MODELFLEET_PRICES", side.prices_path)) if path}
    return run_program(root, stack, config, stand_in_secrets(config), environ)


def run(args: argparse.Namespace) -> int:
    from ..preview.format import format_preview  # pulumi is imported only by this edge command
    from ..preview.runner import run_program

    if args.base is not None:
        from .preview_base import run_base
        return run_base(args)
    if not args.stack or len(args.stack) > 1:
        raise SpecError([Issue("", 0, 0, "--stack", "name one stack to preview (several only with --base)",
                               "e.g. --stack prod")])
    args.stack = args.stack[0]
    project = project_from(args)
    project.environment(args.stack)  # a missing or invalid stack file is reported like every command's
    require_program(project.root)
    config = load_yaml(stack_path(project.stacks_dir, args.stack)).data["config"]
    environ = {key: os.path.abspath(path) for key, path in
               (("MODELFLEET_MODELS", args.models), ("MODELFLEET_PRICES", args.prices)) if path}
    started = time.perf_counter()
    result = run_program(project.root, args.stack, config, stand_in_secrets(config), environ)
    if result.error:  # the program's RunError: every compile problem, located, as `pulumi up` shows them
        print(result.error, file=sys.stderr)
        return EXIT_USER_ERROR
    sys.stdout.write(format_preview(result))  # deterministic; the time and the program's messages go to stderr
    for level, message in result.messages:  # the program's own warnings (the plan's among them)
        print(f"{level}: {message}", file=sys.stderr)
    print(f"preview ran in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0
