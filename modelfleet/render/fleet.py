"""Rendering a FleetPlan to files (pure: a mapping of relative path -> bytes); writing them is outputs.py.

Layout of ``render --out DIR``::

    plan.json                                  the whole plan (what `plan --json` prints)
    triton/<server>/server.json                server command line, replicas, node group
    triton/<server>/<model>/config.pbtxt       Triton model configuration (protobuf text format)
    triton/<server>/<model>/warmup/<input>     a warmup sample its config reads (input_data_file)
    triton/<server>/<pipeline>/config.pbtxt    a pipeline's ensemble, on its steps' server
    triton/<server>/<pipeline>/1/README.txt    its version folder (Triton needs one; S3 has no empty folders)
    triton/<server>/<pipeline>.<llm>/...       an LLM step: a python model calling vLLM (config.pbtxt, 1/model.py)
    vllm/<model>.json                          vllm serve arguments, GPUs per pod, shared memory
    .modelfleet-render                         added by write_tree: marks the directory as replaceable
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..plan.names import refuse_twice
from ..plan.types import FleetPlan, TritonModelPlan, VllmModelPlan
from .outputs import write_tree  # noqa: F401  (re-exported: the public writer lives beside render_fleet)

if TYPE_CHECKING:  # annotations only: cost prices node volumes with k8s.storage, and k8s renders through here
    from ..cost.fleet import FleetCost, MonthlyUsd

Renderer = Callable[[FleetPlan], dict[str, bytes]]


def to_json(data: Any) -> bytes:
    """Deterministic JSON: sorted keys, two-space indent, trailing newline. The bytes of
    ``json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False)``, written by ``_indented`` (three times
    faster: the json module's C encoder only writes unindented JSON) where the data is JSON's own types with
    string keys, and by ``json.dumps`` otherwise."""
    parts: list[str] = []
    try:
        _indented(data, "\n", parts)
    except _NotPlain:
        return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    parts.append("\n")
    return "".join(parts).encode()


class _NotPlain(Exception):
    """A value ``_indented`` leaves to ``json.dumps``: a non-string key, a subclass, a tuple, an unknown type."""


_STRING = json.encoder.py_encode_basestring if json.encoder.c_encode_basestring is None else json.encoder.c_encode_basestring
_CONSTANTS = {True: "true", False: "false", None: "null"}


def _indented(value: Any, newline: str, out: list[str]) -> None:
    kind = type(value)
    if kind is str:
        out.append(_STRING(value))
    elif kind is dict:
        if not value:
            out.append("{}")
            return
        inner = newline + "  "
        for index, key in enumerate(sorted(value)):  # TypeError on mixed keys, as json.dumps raises
            if type(key) is not str:
                raise _NotPlain
            out.append(("," if index else "{") + inner + _STRING(key) + ": ")
            _indented(value[key], inner, out)
        out.append(newline + "}")
    elif kind is list:
        if not value:
            out.append("[]")
            return
        inner = newline + "  "
        for index, item in enumerate(value):
            out.append(("," if index else "[") + inner)
            _indented(item, inner, out)
        out.append(newline + "]")
    elif kind is bool or value is None:
        out.append(_CONSTANTS[value])
    elif kind is int:
        out.append(int.__repr__(value))
    elif kind is float and math.isfinite(value):
        out.append(float.__repr__(value))
    else:
        raise _NotPlain  # NaN and infinities (written Infinity/NaN by json.dumps), and everything else


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
    # Triton's config schema is tritonclient's protobuf (with grpc and numpy, a fifth of a second to import):
    # loaded here, where configs are rendered, not by every command that imports the package (plan, cost)
    from .ensemble import VERSION_NOTE, ensemble_config
    from .llm_step import MODEL_PY, llm_step_config
    from .triton import model_config, render_config
    from .warmup import warmup_files

    files: dict[str, bytes] = {}
    for server in plan.triton_servers:
        files[f"triton/{server.name}/server.json"] = to_json(server.model_dump(mode="json"))
        for name in server.models:
            model = plan.model(name)
            assert isinstance(model, TritonModelPlan)  # LLMs are vLLM's own (Triton's vLLM backend is refused)
            files[f"triton/{server.name}/{name}/config.pbtxt"] = render_config(model_config(model)).encode()
            for path, content in warmup_files(model).items():
                files[f"triton/{server.name}/{name}/{path}"] = content
    for pipeline in plan.pipelines:
        files[f"triton/{pipeline.server}/{pipeline.name}/config.pbtxt"] = render_config(ensemble_config(pipeline)).encode()
        files[f"triton/{pipeline.server}/{pipeline.name}/1/README.txt"] = VERSION_NOTE.encode()
        for step in pipeline.llm_steps:
            files[f"triton/{pipeline.server}/{step.name}/config.pbtxt"] = render_config(
                llm_step_config(pipeline, step)).encode()
            files[f"triton/{pipeline.server}/{step.name}/1/model.py"] = MODEL_PY.encode()
    return files


def render_vllm_settings(plan: FleetPlan) -> dict[str, bytes]:
    return {f"vllm/{m.name}.json": to_json(m.model_dump(mode="json"))
            for m in plan.models if isinstance(m, VllmModelPlan)}


def render_fleet(plan: FleetPlan, extra: tuple[Renderer, ...] = (), cost: FleetCost | None = None,
                 repositories: Mapping[str, bytes] | None = None) -> dict[str, bytes]:
    """Every artifact of one environment. ``extra`` renderers (e.g. Kubernetes manifests) add files;
    with ``cost``, plan.json carries the monthly costs as ``plan --json`` does; ``repositories``: the Triton
    repositories when the caller rendered them already (the manifests embed them too). A path two renderers
    write is refused (plan/names.refuse_twice), never silently replaced."""
    parts = [{"plan.json": to_json(plan_document(plan, cost))},
             render_triton_repositories(plan) if repositories is None else dict(repositories),
             render_vllm_settings(plan), *(renderer(plan) for renderer in extra)]
    refuse_twice((((path,), f"renderer {index}") for index, part in enumerate(parts) for path in part), "render")
    return dict(sorted(item for part in parts for item in part.items()))
