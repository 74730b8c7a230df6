"""Reading models.yaml into a validated FleetSpec, reporting every problem with its file, line and path.

Also the one place that applies a model's per-environment patch (``environments: {dev: {...}}``), so the
loader (which validates every patch up front) and the compiler agree byte for byte.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from ..errors import Issue, ModelfleetError, SpecError
from . import models as S
from .architecture import CONFIGS_CONTEXT, ArchitectureConfigSpec
from .traffic import TRACES_CONTEXT, read_traces
from .warmup import MAX_SAMPLE_BYTES, SAMPLES_CONTEXT
from .issues import issues_from_validation
from .pipelines import PipelineSlaSpec, apply_pipeline_environment, pipeline_problems
from .yaml_source import Document, Path, load_yaml, parse_path, parse_yaml

ModelSpec = S.ClassicModelSpec | S.LlmModelSpec


# ---------------------------------------------------------------------------------------------- environments
def deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in patch.items():
        out[key] = deep_merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def apply_environment(model: ModelSpec, environment: str) -> ModelSpec | None:
    """The model as it runs in ``environment``: its patch merged and re-validated; None when disabled.

    Raises pydantic.ValidationError when the merge is invalid (the loader reports it with positions).
    """
    patch = model.environments.get(environment)
    if patch is None:
        return model
    if not patch.enabled:
        return None
    base = model.model_dump(mode="python", exclude={"environments", "architecture", "warmup"}, exclude_defaults=True)
    merged = deep_merge(base, {k: v for k, v in (("sla", patch.sla), ("profile", patch.profile),
                                                  ("overrides", patch.overrides)) if v})
    return _validated(model, merged)


def with_fields(model: ModelSpec, changes: tuple[tuple[str, Any], ...]) -> ModelSpec:
    """The model with dotted fields set (``("sla.p99_ttft_ms", 800)``), validated again as models.yaml would be
    (pydantic.ValidationError when the result is invalid); its environment patches are dropped: apply them
    first (apply_environment)."""
    base = model.model_dump(mode="python", exclude={"environments", "architecture", "warmup"}, exclude_defaults=True)
    patch: dict[str, Any] = {}
    for path, value in changes:
        node = patch
        *parents, leaf = path.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return _validated(model, deep_merge(base, patch))


def _validated(model: ModelSpec, merged: dict[str, Any]) -> ModelSpec:
    """``merged`` (the model's fields, changed) validated as ``model``'s type; an LLM keeps its architecture as
    validated, and a config.json it names is read from what the loader read (not the disk) again."""
    if not isinstance(model, S.LlmModelSpec):
        if model.warmup is not None:
            merged["warmup"] = model.warmup  # as validated (its sample files were read once)
        return type(model).model_validate(merged)
    arch = model.architecture
    merged["architecture"] = arch
    context = arch.context if isinstance(arch, ArchitectureConfigSpec) else None
    return type(model).model_validate(merged, context=context)


def _check_environments(doc: Document, fleet: S.FleetSpec, known: tuple[str, ...] | None) -> list[Issue]:
    issues: list[Issue] = []
    for index, model in enumerate(fleet.models):
        for env_name, patch in model.environments.items():
            where: Path = ("models", index, "environments", env_name)
            if known is not None and env_name not in known:
                close = difflib.get_close_matches(env_name, known, n=1)
                fix = f"did you mean `{close[0]}`?" if close else f"use one of: {', '.join(known)}"
                issues.append(doc.issue(where, f"no stack named {env_name!r}", fix))
                continue
            try:
                apply_environment(model, env_name)
            except ValidationError as exc:
                issues += issues_from_validation(doc, exc, remap=_patch_remap(where, index, patch))
    return issues


def _patch_remap(where: Path, index: int, patch: S.EnvironmentPatch) -> Any:
    """Point an error at the patch when the patch wrote that field, else at the model's own field."""

    def remap(path: Path) -> Path:
        section = path[0] if path else None
        written = getattr(patch, str(section), None) if section in ("sla", "profile", "overrides") else None
        if isinstance(written, dict) and len(path) > 1 and path[1] in written:
            return where + path
        if isinstance(written, dict) and written and len(path) == 1:
            return where + path
        return ("models", index) + path

    return remap


def _check_pipelines(doc: Document, fleet: S.FleetSpec, known: tuple[str, ...] | None) -> list[Issue]:
    """Each pipeline against the models it names (spec/pipelines.py), and its per-stack patches."""
    models = {m.name: m for m in fleet.models}
    issues: list[Issue] = []
    taken = set(models)
    for index, pipeline in enumerate(fleet.pipelines):
        issues += [doc.issue(path, message, fix) for path, message, fix in
                   pipeline_problems(pipeline, index, models, taken)]
        taken.add(pipeline.name)
        for env_name in pipeline.environments:
            where: Path = ("pipelines", index, "environments", env_name)
            if known is not None and env_name not in known:
                close = difflib.get_close_matches(env_name, known, n=1)
                issues.append(doc.issue(where, f"no stack named {env_name!r}",
                                        f"did you mean `{close[0]}`?" if close else f"use one of: {', '.join(known)}"))
                continue
            try:
                apply_pipeline_environment(pipeline, env_name)
            except ValidationError as exc:
                issues += issues_from_validation(doc, exc, prefix=where + ("sla",), root=PipelineSlaSpec)
    return issues


# ---------------------------------------------------------------------------------------------- entry points
def _duplicate_names(doc: Document) -> list[Issue]:
    models = doc.data.get("models") if isinstance(doc.data, dict) else None
    if not isinstance(models, list):
        return []
    seen: dict[str, int] = {}
    issues = []
    for index, model in enumerate(models):
        name = model.get("name") if isinstance(model, dict) else None
        if not isinstance(name, str):
            continue
        if name in seen:
            line = doc.locate(("models", seen[name], "name"))[0]
            issues.append(doc.issue(("models", index, "name"), f"duplicate model name {name!r} "
                                    f"(also models[{seen[name]}], line {line})", "give each model a unique name"))
        else:
            seen[name] = index
    return issues


# ---------------------------------------------------------------------------------------------- config.json
ConfigReader = Callable[[str], str]  # a path relative to models.yaml -> the file's text (raises OSError)
MAX_CONFIG_BYTES = 4 * 1024 * 1024  # a config.json is a few KB; a multimodal one with long lists under 1 MB


def disk_reader(models_path: str) -> ConfigReader:
    """Read files beside ``models_path`` (architecture: {config: ...} paths are relative to it)."""
    base = os.path.dirname(os.path.abspath(models_path))

    def read(relative: str) -> str:
        with open(os.path.join(base, relative), encoding="utf-8") as handle:
            return handle.read(MAX_CONFIG_BYTES + 1)
    return read


SampleReader = Callable[[str], bytes]  # a path relative to models.yaml -> the file's bytes (raises OSError)


def disk_sample_reader(models_path: str) -> SampleReader:
    """Read warmup samples beside ``models_path``, at most one byte past the limit (spec/warmup.py)."""
    base = os.path.dirname(os.path.abspath(models_path))

    def read(relative: str) -> bytes:
        with open(os.path.join(base, relative), "rb") as handle:
            return handle.read(MAX_SAMPLE_BYTES + 1)
    return read


def read_warmup_samples(data: Any, read: SampleReader) -> dict[str, bytes | str]:
    """Every ``warmup: {inputs: {NAME: PATH}}`` file the document names: PATH -> its bytes, or why it could not
    be read (validation reports that at the input's line)."""
    models = data.get("models") if isinstance(data, dict) else None
    paths = {path for m in models if isinstance(m, dict) and isinstance(m.get("warmup"), dict)
             and isinstance(m["warmup"].get("inputs"), dict)
             for path in m["warmup"]["inputs"].values() if isinstance(path, str)} if isinstance(models, list) else set()
    return {path: _read_sample(path, read) for path in sorted(paths)}


def _read_sample(path: str, read: SampleReader) -> bytes | str:
    try:
        content = read(path)
    except OSError as exc:
        return f"cannot read {path}: {exc.strerror or exc}"
    if len(content) > MAX_SAMPLE_BYTES:
        return f"{path} is larger than {MAX_SAMPLE_BYTES // 2**20} MiB: a warmup sample is one representative request"
    return content


def read_architecture_configs(data: Any, read: ConfigReader) -> dict[str, Any]:
    """Every ``architecture: {config: PATH}`` the document names: PATH -> its parsed JSON, or why it could not
    be read (validation reports that at the ``config:`` line)."""
    models = data.get("models") if isinstance(data, dict) else None
    paths = {m["architecture"]["config"] for m in models if isinstance(m, dict) and isinstance(m.get("architecture"), dict)
             and isinstance(m["architecture"].get("config"), str)} if isinstance(models, list) else set()
    return {path: _read_config(path, read) for path in sorted(paths)}


def _read_config(path: str, read: ConfigReader) -> Any:
    try:
        text = read(path)
    except (OSError, UnicodeDecodeError) as exc:
        return f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}"
    if len(text) > MAX_CONFIG_BYTES:
        return f"{path} is larger than {MAX_CONFIG_BYTES // 2**20} MiB: not a model's config.json"
    try:
        config = json.loads(text)
    except ValueError as exc:
        return f"{path} is not valid JSON: {exc}"
    return config if isinstance(config, dict) else f"{path} holds JSON but not an object of settings"


def parse_fleet(doc: Document, known_environments: tuple[str, ...] | None = None,
                read_config: ConfigReader | None = None, read_sample: SampleReader | None = None) -> S.FleetSpec:
    """Validate a parsed document as a FleetSpec; every problem is collected and raised once. Config files
    named by ``architecture: {config: ...}`` are read with ``read_config`` (default: beside the document)."""
    issues = list(doc.issues) + _duplicate_names(doc)
    if doc.data is None:
        raise SpecError([doc.issue((), "the file is empty", "add `models:` with at least one model")])
    data = _without_extensions(doc.data)
    reader = read_config or disk_reader(doc.filename)
    configs = read_architecture_configs(data, reader)
    samples = read_warmup_samples(data, read_sample or disk_sample_reader(doc.filename))
    context = {CONFIGS_CONTEXT: configs, SAMPLES_CONTEXT: samples, TRACES_CONTEXT: read_traces(data, reader)}
    try:
        fleet = S.FleetSpec.model_validate(data, context=context)
    except ValidationError as exc:
        raise SpecError(issues + issues_from_validation(doc, exc)) from None
    issues += _check_environments(doc, fleet, known_environments)
    issues += _check_pipelines(doc, fleet, known_environments)
    if issues:
        raise SpecError(issues)
    return fleet


EXTENSION_PREFIX = "x-"  # top-level keys for anchors to merge from (`x-defaults: &defaults {...}`), as compose files


def _without_extensions(data: Any) -> Any:
    """The document without its ``x-...`` top-level keys: they hold YAML anchors (shared settings that models
    merge with ``<<: *name``) and are not part of the catalogue themselves."""
    if not isinstance(data, dict):
        return data
    return {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith(EXTENSION_PREFIX))}


def locate_issues(error: ModelfleetError, doc: Document) -> ModelfleetError:
    """The same error with unlocated issues (e.g. a CompileError's ``models[3]``) pointed at their lines."""
    located = [doc.issue(parse_path(i.path), i.message, i.fix) if not i.file else i for i in error.issues]
    return type(error)(located)


def load_fleet_document(path: str, known_environments: tuple[str, ...] | None = None) -> tuple[S.FleetSpec, Document]:
    """Like :func:`load_fleet`, also returning the document so later errors can be located in it."""
    doc = load_yaml(path)
    return parse_fleet(doc, known_environments), doc


def load_fleet(path: str, known_environments: tuple[str, ...] | None = None) -> S.FleetSpec:
    """Read models.yaml. ``known_environments``: stack names a per-model patch may refer to."""
    return parse_fleet(load_yaml(path), known_environments)


def parse_fleet_text(text: str, filename: str = "models.yaml", known_environments: tuple[str, ...] | None = None,
                     read_config: ConfigReader | None = None, read_sample: SampleReader | None = None) -> S.FleetSpec:
    """A catalogue given as text; the config and sample files it names are read beside ``filename`` unless
    ``read_config`` / ``read_sample``."""
    return parse_fleet(parse_yaml(text, filename), known_environments, read_config, read_sample)


def model_schema() -> dict[str, Any]:
    """JSON Schema of models.yaml, for editors (yaml-language-server) and other tools."""
    schema = S.FleetSpec.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "modelfleet models.yaml"
    schema["description"] += (" Top-level keys starting with `x-` are ignored: they hold YAML anchors that models "
                              "merge with `<<: *name` (e.g. `x-defaults: &defaults {team: search}`).")
    schema["patternProperties"] = {f"^{EXTENSION_PREFIX}": {}}
    return schema
