"""``modelfleet doctor --stack S``: what the stack needs its cluster to run (deploy/prerequisites.py decides it from
the objects `pulumi up` would apply), each checked against the cluster of the current kubectl context when
there is access (commands/doctor_cluster.py), else listed with what would be checked. Exit 1 when one is
missing."""

from __future__ import annotations

import argparse

import yaml

from ..deploy.cluster import cluster_name
from ..deploy.prerequisites import check_prerequisites, doctor_report, required_prerequisites
from . import add_project_arguments, project_from

NAME = "doctor"
HELP = "list what the stack needs its cluster to run (LWS, Argo Rollouts, Prometheus, the adapter, the Gateway...) and check it"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser)
    parser.add_argument("--offline", action="store_true", help="do not contact the cluster: say what would be checked")
    parser.add_argument("--context", default=None, help="kubectl context of the stack's cluster (default: the current)")


def stack_objects(files: dict[str, bytes]) -> list[dict]:
    """Every Kubernetes object of the stack's render (what the components apply)."""
    return [doc for path, text in sorted(files.items()) if path.startswith("kubernetes/") and path.endswith(".yaml")
            for doc in yaml.safe_load_all(text) if isinstance(doc, dict)]


def run(args: argparse.Namespace) -> int:
    from .doctor_cluster import KubectlReader, cluster_access

    project = project_from(args)
    plan, files = project.rendered(args.stack)
    env = project.environment(args.stack)
    required = required_prerequisites(env, plan, stack_objects(files))
    problem = "--offline" if args.offline else cluster_access(args.context)
    reader = None if problem else KubectlReader(args.context)
    findings = check_prerequisites(required, reader)
    print(doctor_report(args.stack, cluster_name(env), findings, no_access=problem), end="")
    return 1 if any(f.present is False and not f.prerequisite.installed_by_stack for f in findings) else 0
