from __future__ import annotations

import argparse
import sys

from ..render.client import render_client
from ..render.outputs import write_file
from ..spec.environment import list_stacks
from . import add_project_arguments, print_warnings, project_from

NAME = "client"
HELP = ("generate one minimal typed Python client module for the fleet's Triton models, valid for every stack "
        "(stdout or --out FILE)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser, stack=False)
    parser.add_argument("--stack", action="append", default=None, metavar="STACK",
                        help="only these stacks (repeatable; default: every stack in stacks/, so that one module "
                             "serves them all)")
    parser.add_argument("--out", default=None, metavar="FILE", help="write the module here (default: stdout)")


def run(args: argparse.Namespace) -> int:
    project = project_from(args)
    plans = [project.plan(stack) for stack in (args.stack or list_stacks(project.stacks_dir))]
    source = render_client(plans)
    for plan in plans:
        print_warnings(plan)
    if args.out is None:
        sys.stdout.write(source)
        return 0
    write_file(args.out, source.encode())
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
