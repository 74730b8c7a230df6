"""``modelfleet preview --stack NAME``: what `pulumi up --stack NAME` would create, without AWS or the CLI."""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..errors import EXIT_USER_ERROR
from ..spec.environment import stack_path
from ..spec.yaml_source import load_yaml
from . import add_project_arguments, project_from

NAME = "preview"
HELP = "run the Pulumi program under the SDK's mocks and show what `pulumi up` would create (no AWS, no CLI)"
PLACEHOLDER_TOKEN = "hf_offline_preview_placeholder"  # stands in for the stack's encrypted modelfleet:hfToken


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..preview.format import format_preview  # pulumi is imported only by this edge command
    from ..preview.runner import run_program

    project = project_from(args)
    project.environment(args.stack)  # a missing or invalid stack file is reported like every command's
    config = load_yaml(stack_path(project.stacks_dir, args.stack)).data["config"]
    environ = {key: os.path.abspath(path) for key, path in
               (("MODELFLEET_MODELS", args.models), ("MODELFLEET_PRICES", args.prices)) if path}
    started = time.perf_counter()
    result = run_program(project.root, args.stack, config, {"modelfleet:hfToken": PLACEHOLDER_TOKEN}, environ)
    if result.error:  # the program's RunError: every compile problem, located, as `pulumi up` shows them
        print(result.error, file=sys.stderr)
        return EXIT_USER_ERROR
    sys.stdout.write(format_preview(result))  # deterministic; the time and the program's messages go to stderr
    for level, message in result.messages:  # the program's own warnings (the plan's among them)
        print(f"{level}: {message}", file=sys.stderr)
    print(f"preview ran in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0
