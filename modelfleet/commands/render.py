from __future__ import annotations

import argparse

from ..render import render_fleet, write_tree
from . import add_project_arguments, print_warnings, project_from

NAME = "render"
HELP = "write Triton model repositories, vLLM settings and plan.json for one stack (atomically)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser)
    parser.add_argument("--out", required=True, help="output directory; replaced as a whole, only on success")


def run(args: argparse.Namespace) -> int:
    plan, cost = project_from(args).plan_and_cost(args.stack)
    files = render_fleet(plan, cost=cost)
    write_tree(files, args.out)
    print_warnings(plan)
    print(f"wrote {len(files)} files to {args.out}")
    return 0
