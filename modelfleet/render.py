"""Rendering a FleetPlan to files (pure: a mapping of relative path -> bytes) and writing them atomically.

Layout of ``render --out DIR``::

    plan.json                                  the whole plan (what `plan --json` prints)
    triton/<server>/server.json                server command line, replicas, node group
    triton/<server>/<model>/config.pbtxt       Triton model configuration (protobuf text format)
    triton/<server>/<model>/1/model.json       only for LLMs served by Triton's vLLM backend
    vllm/<model>.json                          vllm serve arguments, GPUs per pod, shared memory
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

from .cost import FleetCost, MonthlyUsd
from .plan import FleetPlan, TritonModelPlan, VllmModelPlan
from .render_triton import model_config, render_config, vllm_backend_config, vllm_backend_model_json

Renderer = Callable[[FleetPlan], dict[str, bytes]]


def to_json(data: Any) -> bytes:
    """Deterministic JSON: sorted keys, two-space indent, trailing newline."""
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def plan_document(plan: FleetPlan, cost: FleetCost | None = None) -> dict[str, Any]:
    """The plan as JSON data (``plan --json``). With its ``cost``: ``monthly_cost_usd`` (min, desired, max;
    null where a price is unknown) at the top level, per node group and per model."""
    doc = plan.model_dump(mode="json")
    if cost is None:
        return doc
    groups = {g.name: g for g in cost.node_groups}
    doc["monthly_cost_usd"] = _monthly(cost.monthly_usd)
    for group in doc["node_groups"]:
        group["monthly_cost_usd"] = _monthly(groups[group["name"]].monthly_usd)
    for model in doc["models"]:
        model["monthly_cost_usd"] = _monthly(cost.model(model["name"]).monthly_usd)
    return doc


def _monthly(monthly: MonthlyUsd | None) -> dict[str, float] | None:
    return None if monthly is None else {key: round(value, 2) for key, value in monthly.model_dump().items()}


def render_triton_repositories(plan: FleetPlan) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for server in plan.triton_servers:
        files[f"triton/{server.name}/server.json"] = to_json(server.model_dump(mode="json"))
        for name in server.models:
            model = plan.model(name)
            if isinstance(model, TritonModelPlan):
                files[f"triton/{server.name}/{name}/config.pbtxt"] = render_config(model_config(model)).encode()
            elif isinstance(model, VllmModelPlan):
                files[f"triton/{server.name}/{name}/config.pbtxt"] = render_config(vllm_backend_config(model)).encode()
                files[f"triton/{server.name}/{name}/1/model.json"] = vllm_backend_model_json(model).encode()
    return files


def render_vllm_settings(plan: FleetPlan) -> dict[str, bytes]:
    return {f"vllm/{m.name}.json": to_json(m.model_dump(mode="json"))
            for m in plan.models if isinstance(m, VllmModelPlan) and m.serving == "vllm"}


def render_fleet(plan: FleetPlan, extra: tuple[Renderer, ...] = (), cost: FleetCost | None = None) -> dict[str, bytes]:
    """Every artifact of one environment. ``extra`` renderers (e.g. Kubernetes manifests) add files;
    with ``cost``, plan.json carries the monthly costs as ``plan --json`` does."""
    files = {"plan.json": to_json(plan_document(plan, cost))}
    files.update(render_triton_repositories(plan))
    files.update(render_vllm_settings(plan))
    for renderer in extra:
        files.update(renderer(plan))
    return dict(sorted(files.items()))


def write_tree(files: Mapping[str, bytes], out_dir: str) -> None:
    """Replace ``out_dir`` with exactly ``files``, all or nothing.

    Everything is written into a sibling temporary directory first; only when that succeeded is it
    swapped in with renames. A failure at any point leaves the previous output untouched.
    """
    out_dir = os.path.abspath(out_dir)
    parent = os.path.dirname(out_dir)
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".modelfleet-render-", dir=parent)
    try:
        for relative, content in files.items():
            target = os.path.join(staging, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(content)
        _swap(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def _swap(staging: str, out_dir: str) -> None:
    if not os.path.exists(out_dir):
        os.rename(staging, out_dir)
        return
    retired = tempfile.mkdtemp(prefix=".modelfleet-old-", dir=os.path.dirname(out_dir))
    os.rmdir(retired)
    os.rename(out_dir, retired)
    try:
        os.rename(staging, out_dir)
    except BaseException:
        os.rename(retired, out_dir)
        raise
    shutil.rmtree(retired, ignore_errors=True)
