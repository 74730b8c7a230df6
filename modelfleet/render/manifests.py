"""Every Kubernetes object of a fleet, grouped by workload, and the files ``render`` writes of them: the
workloads' own objects (render/k8s/) with their alert rules and dashboards (render/observability/) beside them.

Its own module, above both packages: the observability package reads the workloads' start-up budgets from
render/k8s/, so the k8s package's own ``__init__`` cannot import it back (the cycle that was hidden by import
order before).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cost.fleet import FleetCost
from ..plan.forked import can_fork, forked_pool, shared
from ..plan.names import refuse_twice
from ..plan.teams import workload_team
from ..plan.types import FleetPlan, TritonServerPlan, VllmModelPlan
from ..spec.environment import DeploySettings
from .fleet import render_triton_repositories
from .k8s import CLUSTER, model_repository_bucket, render_cluster_manifests, render_triton_manifests
from .k8s import render_vllm_manifests, repository_files, vllm_models
from .k8s import common as c
from .k8s.common import with_team
from .k8s.prerequisites import ADAPTER_VALUES_FILE, render_adapter_values
from .k8s.yaml_dump import dump_yaml
from .observability import DashboardBuilder, dashboard_config_map, fleet_config_map, prometheus_rule, rule_groups
from .observability import workload_dashboard


def render_fleet_manifests(plan: FleetPlan, deploy: DeploySettings, repositories: Mapping[str, bytes] | None = None, *,
                           docs_url: str | None = None, dashboards: DashboardBuilder | None = None,
                           cost: FleetCost | None = None, dcgm_exporter: bool = False) -> dict[str, list[dict[str, Any]]]:
    """Objects grouped by workload ("cluster", each Triton server, each vLLM model), each in apply order.
    ``repositories``: the rendered Triton repositories (rendered here when not given). Every workload gets its
    PrometheusRule (runbook links under ``docs_url``); with a ``dashboards`` builder, its dashboard ConfigMap,
    and the cluster group the fleet overview (with ``cost``). ``dcgm_exporter``: the stack creates its cluster,
    so the cluster group installs NVIDIA's DCGM exporter (a joined cluster runs its own: deploy/prerequisites.py)."""
    files = render_triton_repositories(plan) if repositories is None else repositories
    bucket = model_repository_bucket(plan, deploy)
    pieces = [(CLUSTER, render_cluster_manifests(plan, deploy.ami_type, deploy.install_device_plugin, dcgm_exporter))]
    pieces += [(server.name, render_triton_manifests(plan, server, bucket, deploy.aws_cli_image,
                                                     repository_files(files, server), deploy.caller_proxy_image))
               for server in plan.triton_servers]
    pieces += [(model.name, render_vllm_manifests(plan, model)) for model in vllm_models(plan)]
    refuse_twice((((name,), f"workload {name}") for name, _ in pieces), "render")
    groups = dict(pieces)
    for workload in (*plan.triton_servers, *vllm_models(plan)):
        groups[workload.name] += _observability(plan, workload, docs_url, dashboards)
    if dashboards is not None and cost is not None:
        groups[CLUSTER].append(fleet_config_map(plan, cost, dashboards))
    refuse_twice((((o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]), f"kubernetes/{name}.yaml")
                  for name, objects in groups.items() for o in objects), "render")
    servers = {s.name for s in plan.triton_servers}  # labelled with the plan's name (c.SERVER_LABEL)
    return {name: [_labelled(with_team(o, workload_team(plan, name)), name if name in servers else None)
                   for o in objects] for name, objects in groups.items()}


def _labelled(obj: dict[str, Any], server: str | None) -> dict[str, Any]:
    return obj if server is None else c.with_label(obj, c.SERVER_LABEL, server)


def _observability(plan: FleetPlan, workload: TritonServerPlan | VllmModelPlan, docs_url: str | None,
                   dashboards: DashboardBuilder | None) -> list[dict[str, Any]]:
    objects = [prometheus_rule(plan, c.kube_name(workload), rule_groups(plan, workload, docs_url=docs_url))]
    if dashboards is not None:
        objects.append(dashboard_config_map(plan, workload_dashboard(plan, workload), dashboards))
    return objects


def render_kubernetes(plan: FleetPlan, deploy: DeploySettings, *, docs_url: str | None = None,
                      dashboards: DashboardBuilder | None = None, cost: FleetCost | None = None,
                      repositories: Mapping[str, bytes] | None = None, dcgm_exporter: bool = False,
                      workers: int = 1) -> dict[str, bytes]:
    """``kubernetes/<workload>.yaml``: one multi-document file per workload, objects in apply order, keys
    sorted; and ``prerequisites/``: the prometheus-adapter values a platform team installs for the HPAs.
    ``repositories``: the rendered Triton repositories, when the caller has them (rendered here otherwise).
    ``workers``: processes the files are written to YAML in (``dump_files``); the bytes are the same."""
    manifests = render_fleet_manifests(plan, deploy, repositories, docs_url=docs_url, dashboards=dashboards,
                                       cost=cost, dcgm_exporter=dcgm_exporter)
    names = sorted(manifests)
    texts = dump_files([manifests[name] for name in names], workers)
    files = {f"kubernetes/{name}.yaml": text for name, text in zip(names, texts)}
    return files | {ADAPTER_VALUES_FILE: render_adapter_values()}


# Below this many files the fork costs more than the YAML it spreads (a fork and a worker's start: ~50 ms).
FILES_PER_WORKER = 64


def dump_files(files: list[list[dict[str, Any]]], workers: int = 1) -> list[bytes]:
    """``dump_yaml`` of each file (a list of objects), in order: in up to ``workers`` forked processes
    (plan/forked.py: they read the objects the fork gave them; only each file's index goes out and its bytes
    come back) when there are enough files to pay for them. libyaml's emitting is most of a 1,000-model
    render's manifests (about 1 s of 1.6): two workers halve it on two cores. ``dump_yaml`` is a pure
    function of its objects, so the bytes do not depend on where it ran."""
    workers = min(workers, len(files) // FILES_PER_WORKER)
    if not can_fork(workers):
        return [dump_yaml(objects) for objects in files]
    with forked_pool(files, workers) as pool:
        return pool.map(_dump_at, range(len(files)), chunksize=max(1, len(files) // (4 * workers)))


def _dump_at(index: int) -> bytes:
    return dump_yaml(shared()[index])
