from __future__ import annotations

import argparse
import sys

from ..render.client import render_client
from ..render.outputs import write_file
from . import add_project_arguments, print_warnings, project_from

NAME = "client"
HELP = "generate a minimal typed Python client module for a stack's Triton models (stdout or --out FILE)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser)
    parser.add_argument("--out", default=None, metavar="FILE", help="write the module here (default: stdout)")


def run(args: argparse.Namespace) -> int:
    plan = project_from(args).plan(args.stack)
    source = render_client(plan)
    print_warnings(plan)
    if args.out is None:
        sys.stdout.write(source)
        return 0
    write_file(args.out, source.encode())
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
