from __future__ import annotations

import argparse

from ..grafana import dashboard_builder
from ..render.outputs import MARKER, write_tree
from . import add_project_arguments, print_warnings, project_from
from .lock import write_stack_lock

NAME = "render"
HELP = ("write Triton model repositories, vLLM settings, Kubernetes manifests (alert rules and dashboards "
        "included) and plan.json (atomically)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser)
    parser.add_argument("--out", required=True,
                        help=f"output directory: new, empty, or a previous render holding only what it wrote (its "
                             f"{MARKER} lists every file); replaced as a whole, only on success, one render at a "
                             "time. Anything else there is named and refused, never deleted")


def run(args: argparse.Namespace) -> int:
    project = project_from(args)
    source = project.fleet_source()
    plan, files = project.rendered(args.stack, dashboards=dashboard_builder(), source=source)
    keep = {project.root: "the project directory", project.models_path: "the catalogue",
            project.stacks_dir: "the stacks directory", **({project.prices_file: "the price table"} if project.prices_file else {})}
    write_tree(files, args.out, keep=keep | {project.lock_path: "the placement lock"})
    write_stack_lock(project, args.stack, plan, source[0])
    print_warnings(plan)
    print(f"wrote {len(files)} files to {args.out}")
    return 0
