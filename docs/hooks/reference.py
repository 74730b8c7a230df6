"""MkDocs hook: the reference pages, generated at build time from the code, so they cannot drift.

- ``reference/models-yaml.md`` from the models.yaml JSON Schema (``modelfleet schema``: every key, its type,
  default, bounds and description, as the validator enforces them);
- ``reference/stack-keys.md`` from the stack settings' schema (the ``modelfleet:*`` keys of a stack file);
- ``reference/cli.md`` from the command line's own argument parsers.

The functions are pure (schema in, markdown out) and tested in tests/test_docs.py.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from typing import Any

PAGES = {
    "reference/models-yaml.md": "models_yaml_reference",
    "reference/stack-keys.md": "stack_keys_reference",
    "reference/cli.md": "cli_reference",
}


# ------------------------------------------------------------------------------------------ schema walking
def _ref(schema: dict[str, Any], node: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return name, schema["$defs"][name]
    return None, node


def _type(schema: dict[str, Any], node: dict[str, Any]) -> str:
    """A short type: ``number``, ``list of TensorSpec``, ``one of A, B``, ``"a" | "b"``."""
    name, node = _ref(schema, node)
    if name:
        return f"[{name}](#{name.lower()})" if "properties" in node else _type(schema, node)
    if "enum" in node:
        return " | ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    for key in ("anyOf", "oneOf"):
        if key in node:
            kinds = [_type(schema, n) for n in node[key] if n.get("type") != "null"]
            return " or ".join(dict.fromkeys(kinds)) + (" (or null)" if len(kinds) < len(node[key]) else "")
    kind = node.get("type", "any")
    if kind == "array":
        items = node.get("items") or (node.get("prefixItems") or [{}])[0]
        return f"list of {_type(schema, items)}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"map of {_type(schema, node['additionalProperties'])}"
    return kind


def _bounds(node: dict[str, Any]) -> str:
    parts = []
    for key, word in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"),
                      ("minLength", "length >="), ("maxLength", "length <="), ("minItems", "items >="),
                      ("maxItems", "items <="), ("pattern", "matches")):
        if key in node:
            value = node[key]
            parts.append(f"{word} `{value}`" if key == "pattern" else f"{word} {value:,}" if isinstance(value, (int, float)) else f"{word} {value}")
    return ", ".join(parts)


def _flat(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """Bounds and description may sit on the field or on the one non-null branch of an optional field."""
    _, node = _ref(schema, node)
    merged = dict(node)
    for key in ("anyOf", "oneOf"):
        branches = [b for b in node.get(key, []) if b.get("type") != "null"]
        if len(branches) == 1:
            merged = {**_ref(schema, branches[0])[1], **{k: v for k, v in node.items() if k != key}}
    return merged


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _object_table(schema: dict[str, Any], node: dict[str, Any], rename) -> Iterator[str]:
    required = set(node.get("required", ()))
    yield "| key | type | default | bounds | description |"
    yield "|---|---|---|---|---|"
    for key, field in node.get("properties", {}).items():
        written = rename(key)
        if written is None:
            continue
        flat = _flat(schema, field)
        default = "required" if key in required else _default(field)
        yield (f"| `{written}` | {_cell(_type(schema, field))} | {_cell(default)} | {_cell(_bounds(flat))} | "
               f"{_cell(field.get('description') or flat.get('description') or '')} |")


def _default(field: dict[str, Any]) -> str:
    """A scalar or short list default as written in YAML; a nested object's defaults are in its own table."""
    if "default" not in field or isinstance(field["default"], dict):
        return ""
    return f"`{json.dumps(field['default'])}`"


def _sections(schema: dict[str, Any], roots: list[str], rename=lambda section, key: key) -> Iterator[str]:
    """One section per object type, in the order they are reached from ``roots``; ``rename(section, key)``
    says how a key is written."""
    seen: list[str] = []
    queue = list(roots)
    while queue:
        name = queue.pop(0)
        if name in seen:
            continue
        seen.append(name)
        node = schema["$defs"][name] if name in schema.get("$defs", {}) else schema
        queue += _referenced(node)
        yield f"## {name}\n"
        if node.get("description"):
            yield node["description"].strip() + "\n"
        yield from _object_table(schema, node, lambda key, section=name: rename(section, key))
        yield ""


def _referenced(node: Any) -> list[str]:
    found: list[str] = []
    if isinstance(node, dict):
        if "$ref" in node:
            found.append(node["$ref"].rsplit("/", 1)[-1])
        for value in node.values():
            found += _referenced(value)
    elif isinstance(node, list):
        for value in node:
            found += _referenced(value)
    return found


# ------------------------------------------------------------------------------------------------- pages
def models_yaml_reference() -> str:
    from modelfleet.spec.load import model_schema

    schema = model_schema()
    head = ["# models.yaml reference", "",
            "Generated from the models.yaml schema at build time (`modelfleet schema` prints the same schema as "
            "JSON for editors). Unknown keys are errors; types are strict (YAML 1.2: only `true`/`false` are "
            "booleans); every number is bounded as below, and an error names the file, line, key and fix.", "",
            "A model is a classic model ([ClassicModelSpec](#classicmodelspec), served by Triton) or an LLM "
            "([LlmModelSpec](#llmmodelspec), `type: llm`, served by vLLM).", ""]
    schema = {**schema, "$defs": {**schema["$defs"], "FleetSpec": {k: v for k, v in schema.items() if k != "$defs"}}}
    return "\n".join(head + list(_sections(schema, ["FleetSpec"]))) + "\n"


def stack_keys_reference() -> str:
    from modelfleet.spec.environment import EnvironmentSpec
    from modelfleet.spec.stack_keys import CONFIG_NAMESPACE

    schema = EnvironmentSpec.model_json_schema(by_alias=True)
    schema["$defs"] = {**schema.get("$defs", {}), "EnvironmentSpec": {k: v for k, v in schema.items() if k != "$defs"}}
    head = ["# Stack keys reference", "",
            "Generated from the stack settings' schema at build time. A stack file "
            "(`stacks/Pulumi.<stack>.yaml`) sets these under `config:` as `modelfleet:<key>` (and the region as "
            "`aws:region`); `pulumi up` and every `modelfleet` command read the same keys. The first table is "
            "the top-level keys; the others are the fields of the nested settings.", ""]

    def written(section: str, key: str) -> str:
        if section != "EnvironmentSpec":
            return key
        if key == "name":
            return None  # the stack's name comes from its file name, not from a key
        return "aws:region" if key == "region" else f"{CONFIG_NAMESPACE}:{key}"

    return "\n".join(head + list(_sections(schema, ["EnvironmentSpec"], written))) + "\n"


def cli_reference() -> str:
    from modelfleet.cli import build_parser

    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal: the page must not depend on it
    parser = build_parser()
    lines = ["# Command line reference", "", "Generated from the command line's own parsers at build time.", "",
             "Exit codes: 0 success; 2 a problem in the input, an infeasible plan or an output that cannot be "
             "written (every problem printed, nothing written); 130 interrupted; anything else is a bug.", "",
             "```text", parser.format_help().rstrip(), "```", ""]
    for action in parser._subparsers._group_actions:  # noqa: SLF001 (argparse has no public walk)
        for name, sub in action.choices.items():
            lines += [f"## modelfleet {name}", "", "```text", sub.format_help().rstrip(), "```", ""]
            lines += list(_nested(sub, f"modelfleet {name}"))
    return "\n".join(lines) + "\n"


def _nested(parser: argparse.ArgumentParser, prefix: str) -> Iterator[str]:
    for action in parser._actions:  # noqa: SLF001
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for name, sub in action.choices.items():
                yield from [f"### {prefix} {name}", "", "```text", sub.format_help().rstrip(), "```", ""]


# --------------------------------------------------------------------------------------------- the hook
def on_files(files, config):  # noqa: ANN001 (MkDocs' hook signature)
    from mkdocs.structure.files import File

    for path, function in PAGES.items():
        files.append(File.generated(config, path, content=globals()[function]()))
    return files
