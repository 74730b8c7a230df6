"""One module per CLI subcommand (see modelfleet.cli), and the edge adapters only they use: ``cost_sources.py``
(models.yaml, stacks and prices read from files and git for ``cost --base``) and ``price_refresh.py`` (the AWS
Pricing API for ``prices refresh``)."""

from __future__ import annotations

import argparse
import os
import sys

from ..plan.types import FleetPlan
from ..project import Project
from ..simcache import cache_root


def add_project_arguments(parser: argparse.ArgumentParser, stack: bool = True) -> None:
    if stack:
        parser.add_argument("--stack", required=True, help="environment: stacks/Pulumi.<STACK>.yaml")
    parser.add_argument("--models", default=None, help="catalogue file (default: <project>/models.yaml)")
    parser.add_argument("--prices", default=None, help="instance/price table (default: the shipped one)")


def project_from(args: argparse.Namespace) -> Project:
    root = cache_root(os.environ)
    return Project(root=args.project, models_file=args.models, prices_file=getattr(args, "prices", None),
                   workers=cpus(), cache_dir=None if root is None else str(root))


def cpus() -> int:
    """The CPUs this process may run on (Linux's affinity mask; elsewhere, such as macOS, the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def print_warnings(plan: FleetPlan) -> None:
    for warning in plan.warnings:
        print(f"warning: {warning.model}: {warning.message}", file=sys.stderr)
