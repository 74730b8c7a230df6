from __future__ import annotations

import argparse

from . import add_project_arguments, project_from

NAME = "validate"
HELP = "check models.yaml (and every stack file) and report every problem with its line"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser, stack=False)


def run(args: argparse.Namespace) -> int:
    project = project_from(args)
    fleet = project.fleet()
    stacks = project.stacks()
    for stack in stacks:
        project.environment(stack)
    print(f"{project.models_path}: {len(fleet.models)} models valid; stacks checked: {', '.join(stacks) or 'none'}")
    return 0
