from __future__ import annotations

import argparse

from ..render import write_tree
from . import add_project_arguments, print_warnings, project_from

NAME = "render"
HELP = "write Triton model repositories, vLLM settings, Kubernetes manifests and plan.json (atomically)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser)
    parser.add_argument("--out", required=True, help="output directory; replaced as a whole, only on success")


def run(args: argparse.Namespace) -> int:
    plan, files = project_from(args).rendered(args.stack)
    write_tree(files, args.out)
    print_warnings(plan)
    print(f"wrote {len(files)} files to {args.out}")
    return 0
