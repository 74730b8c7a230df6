"""``modelfleet stacks``: the project's stacks in deploy order, each with its region, cluster and namespace, for
the workflows (the preview job's matrix, each deploy stage's AWS region and rollout check)."""

from __future__ import annotations

import argparse
import json

from ..deploy.cluster import cluster_name
from ..scaffold.deploy_workflow import deploy_order
from . import project_from

NAME = "stacks"
HELP = "list the stacks in deploy order with their region, cluster and namespace (json, or GitHub step outputs)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", default=None, help="one stack (default: every stack)")
    parser.add_argument("--format", choices=("json", "github-output"), default="json",
                        help="json, or GitHub step outputs: `stacks=<json>`, or with --stack `region=`, `cluster=`, "
                             "`namespace=` lines")
    parser.add_argument("--models", default=None, help=argparse.SUPPRESS)


def describe(project, stack: str) -> dict[str, str]:
    env = project.environment(stack)
    return {"stack": stack, "region": env.region, "cluster": cluster_name(env), "namespace": env.namespace}


def run(args: argparse.Namespace) -> int:
    project = project_from(args)
    stacks = [args.stack] if args.stack else list(deploy_order(project.stacks()))
    rows = [describe(project, stack) for stack in stacks]
    if args.format == "json":
        print(json.dumps(rows, indent=2))
    elif args.stack:
        print("\n".join(f"{key}={value}" for key, value in rows[0].items() if key != "stack"))
    else:
        print(f"stacks={json.dumps(rows, separators=(',', ':'))}")
    return 0
