"""The program's body: stack config + models.yaml -> compile -> deploy plan -> components -> exports.

Every decision is the compiler's (the same one `modelfleet plan/render` runs) and the deploy plan's
(modelfleet.deploy, given the node groups running now); components only create. MODELFLEET_MODELS /
MODELFLEET_PRICES point at another catalogue or price table (`modelfleet preview` passes its --models /
--prices this way). MODELFLEET_WORKERS: processes that run the LLMs' simulations before the compile
(plan/prewarm.py; the plan is the same, sooner); unset, 1: the program runs beside the Pulumi SDK's gRPC
threads, and a fork there makes gRPC log a line per worker (`modelfleet preview` runs with 1 too, and reads
the simulations `plan` left in the disk cache).
Simulations are read from and kept in the disk cache `modelfleet plan` uses (simcache.py; MODELFLEET_CACHE=off
turns it off). The project directory is the working directory, as `pulumi up` runs it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import pulumi

from ..components import build_fleet, read_live_cluster, read_live_node_groups, read_stack_config
from ..deploy import cluster_deploy, compile_deploy_plan
from ..deploy.checks import cluster_issues, credential_issues, version_issues
from ..deploy.node_groups import zone_issues
from ..deploy.types import DeployPlan
from ..errors import Issue, ModelfleetError, SpecError
from ..grafana import dashboard_builder
from ..project import Project
from ..simcache import cache_root
from ..spec.environment import deployment_issues


MAX_WORKERS = 256


def run() -> None:
    """Deploy (or preview) the running stack: every problem located and nothing created, or every resource."""
    stack = pulumi.get_stack()
    hf_token = pulumi.Config("modelfleet").get_secret("hfToken")
    try:
        fleet, warnings = _deploy_plan(stack, hf_token is not None)
    except ModelfleetError as error:  # every problem, located, and nothing created
        raise pulumi.RunError(f"modelfleet cannot deploy stack {stack}:\n" + "\n".join(map(str, error.issues))) from None
    for message in (*fleet.warnings, *warnings):
        pulumi.log.warn(message)
    for note in fleet.notes:
        pulumi.log.info(note)
    for name, value in build_fleet(fleet, hf_token).items():
        pulumi.export(name, value)


def workers_from(environ: Mapping[str, str]) -> int:
    """MODELFLEET_WORKERS (module docstring): a whole number from 1 to 256, else a located error; unset: 1."""
    text = environ.get("MODELFLEET_WORKERS", "1").strip()
    if not text.isdigit() or not 1 <= int(text) <= MAX_WORKERS:
        raise SpecError([Issue("MODELFLEET_WORKERS", 0, 0, "", f"the environment variable MODELFLEET_WORKERS is "
                               f"{text!r}: it must be a whole number of processes from 1 to {MAX_WORKERS}",
                               "unset it (1 process), or set it to the CPUs to use, e.g. MODELFLEET_WORKERS=4")])
    return int(text)


def _deploy_plan(stack: str, has_hf_token: bool) -> tuple[DeployPlan, list[str]]:
    cache = cache_root(os.environ)
    project = Project(root=".", models_file=os.environ.get("MODELFLEET_MODELS"),
                      prices_file=os.environ.get("MODELFLEET_PRICES"), workers=workers_from(os.environ),
                      cache_dir=None if cache is None else str(cache))
    stack_file = project.environment_path(stack)
    deployment = project.deployment(stack, read_stack_config(), dashboards=dashboard_builder())
    if issues := deployment_issues(deployment.env, stack_file) + cluster_issues(deployment.env, stack_file):
        raise SpecError(issues)
    cluster = read_live_cluster(cluster_deploy(deployment.env))
    live = read_live_node_groups(cluster_deploy(deployment.env))
    fleet = compile_deploy_plan(deployment, live, pulumi.get_project(), cluster)
    errors, warnings = credential_issues(fleet, has_hf_token, pulumi.runtime.is_dry_run(), stack_file)
    old, drift = version_issues(deployment.env, deployment.plan, cluster, stack_file)
    errors += old + zone_issues(deployment.plan, cluster.subnets, stack_file)
    if errors:  # a real deploy of hub models without the token would crash-loop for hours
        raise SpecError(errors)
    return fleet, [*warnings, *drift]
