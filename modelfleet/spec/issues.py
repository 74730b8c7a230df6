"""Pydantic's validation errors as our located issues, in our words: what is wrong, and how to fix it.

Pydantic says "Input should be a valid dictionary or instance of FleetSpec"; a person wrote YAML, so we say
"expected a mapping of keys to values, got a list". Each error type has one message and one fix here; a
range error's fix is the field's own ``description`` (its unit and the reason for its bound), and an unknown
key is matched against the keys of the exact mapping it was written in (an LLM's keys for an LLM), so the
did-you-mean never offers a key that would be unknown there too.
"""

from __future__ import annotations

import difflib
import functools
import typing
from collections.abc import Callable, Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from ..errors import Issue
from . import models as S
from .yaml_source import Document, Path

Remap = Callable[[Path], Path]

_DNS_LABEL_FIX = ("use lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 "
                  "characters (a DNS-1123 label)")
_PATTERN_FIXES = {
    "name": _DNS_LABEL_FIX,
    "pool": _DNS_LABEL_FIX,
    "instance_type": "write an EC2 instance type such as g6e.12xlarge",
}
_YAML11_BOOLEANS = {"yes", "no", "on", "off", "y", "n"}
_LITERAL_FIXES = {
    (S.ClassicModelSpec, "serving"): "a classic model is always served by Triton (vLLM serves LLMs, type: llm): "
                                     "drop `serving`",
}
# The other kind's section, for a key written in the wrong kind of model: (class, what it is).
_KINDS: dict[type[BaseModel], str] = {
    S.ClassicModelSpec: "classic (Triton) models", S.LlmModelSpec: "LLMs (type: llm)",
    S.ClassicSlaSpec: "a classic model's sla", S.LlmSlaSpec: "an LLM's sla",
    S.ClassicProfileSpec: "a classic model's profile", S.LlmProfileSpec: "an LLM's profile",
    S.ClassicOverridesSpec: "a classic model's overrides", S.LlmOverridesSpec: "an LLM's overrides",
}
_SIBLINGS = {S.ClassicModelSpec: S.LlmModelSpec, S.ClassicSlaSpec: S.LlmSlaSpec,
             S.ClassicProfileSpec: S.LlmProfileSpec, S.ClassicOverridesSpec: S.LlmOverridesSpec}
_SIBLINGS.update({v: k for k, v in list(_SIBLINGS.items())})
_ROOTS = {cls.__name__: cls for cls in (S.FleetSpec, S.ClassicModelSpec, S.LlmModelSpec)}


def issues_from_validation(doc: Document, exc: ValidationError, prefix: Path = (), remap: Remap | None = None,
                           root: type[BaseModel] | None = None) -> list[Issue]:
    """One located issue per error; ``root`` is the class validated (default: from the error's title)."""
    root = root or _ROOTS.get(exc.title)
    errors = exc.errors(include_url=False)
    locs = [clean_loc(e["loc"]) for e in errors]
    issues = []
    for error, loc in zip(errors, locs):
        if error["type"] == "too_short" and any(len(o) > len(loc) and o[:len(loc)] == loc for o in locs):
            continue  # pydantic also says "too short" when it dropped invalid items; the items say why
        path, fix = prefix + loc, ""
        problem = (error.get("ctx") or {}).get("error")
        if isinstance(problem, S.FieldProblem):
            path, fix = path + problem.path, problem.fix
        path = remap(path) if remap is not None else path
        if path in doc.unreadable:
            continue  # the YAML layer already said this value could not be read
        if error["type"] == "missing" and any(path[:len(p)] == p for p in doc.incomplete):
            continue  # it would have come from a merge key (<<) the YAML layer already reported
        owner = owner_of(root, _to_key(tuple(error["loc"]))) if root else None
        issues.append(doc.issue(path, message_for(error), fix or fix_for(error, owner, loc)))
    return issues


def _to_key(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """A list item's location as its list's: the list's key has the description and bounds."""
    while loc and isinstance(loc[-1], int):
        loc = loc[:-1]
    return loc


def clean_loc(loc: Iterable[Any]) -> Path:
    """Drop pydantic's union tags and function names so the path is the document's own."""
    return tuple(p for p in loc if not (isinstance(p, str) and (p in S.UNION_TAGS or p.startswith("function-"))))


# ---------------------------------------------------------------------------------------------- messages
def message_for(error: dict[str, Any]) -> str:
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    got = f", got {shown(value)}"
    messages = {
        "missing": "required field is missing",
        "extra_forbidden": "unknown key",
        "model_type": f"expected a mapping of keys to values{got}",
        "model_attributes_type": f"expected a mapping of keys to values{got}",
        "dict_type": f"expected a mapping of keys to values{got}",
        "tuple_type": f"expected a list{got}",
        "list_type": f"expected a list{got}",
        "int_type": f"expected a whole number{got}",
        "int_parsing": f"expected a whole number{got}",
        "int_from_float": f"expected a whole number{got}",
        "float_type": f"expected a number{got}",
        "float_parsing": f"expected a number{got}",
        "finite_number": f"must be a finite number{got}",
        "bool_type": f"expected true or false{got}",
        "bool_parsing": f"expected true or false{got}",
        "string_type": f"expected text{got}",
        "greater_than": f"must be greater than {number(ctx.get('gt'))}{got}",
        "greater_than_equal": f"must be at least {number(ctx.get('ge'))}{got}",
        "less_than": f"must be less than {number(ctx.get('lt'))}{got}",
        "less_than_equal": f"must be at most {number(ctx.get('le'))}{got}",
        "literal_error": f"must be one of {ctx.get('expected')}{got}",
        "string_pattern_mismatch": f"{value!r} is not in the expected format",
        "string_too_long": f"is longer than {ctx.get('max_length')} characters",
        "too_short": f"needs at least {ctx.get('min_length')} item(s)",
        "too_long": f"has more than {number(ctx.get('max_length'))} items",
        "architecture_form": f"{error['msg']}{got}",
    }
    if kind in messages:
        return messages[kind]
    return str(error["msg"]).removeprefix("Value error, ").removeprefix("Assertion failed, ")


def shown(value: Any) -> str:
    """A value as the person wrote it in YAML, shortened."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "nothing (null)"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, int):
        return number(value)
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def number(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, int) or (value.is_integer() and abs(value) < 1e15):
        return f"{int(value):,}"
    return f"{value:g}"


# ---------------------------------------------------------------------------------------------- fixes
def fix_for(error: dict[str, Any], owner: type[BaseModel] | None, loc: Path) -> str:
    kind, value = error["type"], error.get("input")
    key = next((str(part) for part in reversed(loc) if isinstance(part, str)), "")  # a list item: its list
    if kind == "missing":
        return S.ARCHITECTURE_FORMS if (owner, key) == (S.LlmModelSpec, "architecture") else f"add `{key}:`"
    if kind == "extra_forbidden":
        return unknown_key_fix(key, owner)
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return "start the file with `models:` and a list of models" if not loc else "write `key: value` lines under it"
    if kind in ("tuple_type", "list_type"):
        return "write a YAML list: `- item` lines, or [a, b]"
    if kind == "literal_error":
        return _LITERAL_FIXES.get((owner, key)) or _closest_value(value, error.get("ctx") or {})
    if kind == "string_pattern_mismatch":
        return _PATTERN_FIXES.get(key, "see `modelfleet schema` for the format")
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal", "finite_number"):
        return _description(owner, key) or "see `modelfleet schema` for the allowed range"
    return _type_fix(kind, value, owner, key)


def _type_fix(kind: str, value: Any, owner: type[BaseModel] | None, key: str) -> str:
    if kind.startswith("bool_"):
        if isinstance(value, str) and value.lower() in _YAML11_BOOLEANS:
            return f"write true or false: {value!r} is text in YAML 1.2, not a boolean"
        return "write true or false"
    if kind.startswith(("int_", "float_")):
        if isinstance(value, str):
            return "write the number without quotes" if _is_number(value) else "write a number"
        if isinstance(value, bool):
            return "write a number: true and false are not numbers"
        if isinstance(value, float) and value.is_integer():
            return f"write {int(value)}, without a decimal point"
        return _description(owner, key) or "write a number"
    if kind == "string_type":
        return f"quote it: '{shown(value)}'" if isinstance(value, (int, float)) else "write text"
    if kind == "too_short":
        return "add at least one"
    if kind == "too_long":
        return _description(owner, key) or "write fewer items"
    if kind == "architecture_form":
        return ("write a preset name such as llama-3.1-8b, {config: path of the model's config.json}, or layers, "
                "attention_heads, kv_heads and head_dim")
    return "correct the value"


def unknown_key_fix(key: str, owner: type[BaseModel] | None) -> str:
    """Did-you-mean among the keys of the mapping the key was written in; or which kind of model it is for."""
    if owner is None:
        return "remove it; see `modelfleet schema` for the allowed keys"
    close = difflib.get_close_matches(key, vocabulary(owner), n=1, cutoff=0.6)
    sibling = _SIBLINGS.get(owner)
    if not close and sibling is not None and key in vocabulary(sibling):
        return f"`{key}` belongs to {_KINDS[sibling]}, not to {_KINDS[owner]}: remove it"
    if close:
        return f"did you mean `{close[0]}`?"
    return f"remove it; the keys here are {', '.join(vocabulary(owner))}"


@functools.lru_cache(maxsize=None)
def vocabulary(cls: type[BaseModel]) -> tuple[str, ...]:
    return tuple(sorted(field.alias or name for name, field in cls.model_fields.items()))


def _closest_value(value: Any, ctx: dict[str, Any]) -> str:
    expected = [part.strip(" '") for part in str(ctx.get("expected", "")).replace(" or ", ", ").split(",")]
    if isinstance(value, str):
        lowered = {e.lower(): e for e in expected}
        close = difflib.get_close_matches(value.lower(), list(lowered), n=1, cutoff=0.6)
        if close:
            return f"did you mean `{lowered[close[0]]}`?"
    return "use one of the listed values"


def _description(owner: type[BaseModel] | None, key: str) -> str:
    field = _field(owner, key) if owner else None
    return (field.description or "") if field else ""


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


# ---------------------------------------------------------------------------------------------- owners
def owner_of(root: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class whose mapping holds the last part of ``loc`` (pydantic's raw location, with its
    union tags: they say which kind of model the mapping was validated as)."""
    cls: type[BaseModel] | None = root
    parts = list(loc[:-1])
    while parts and cls is not None:
        part = parts.pop(0)
        if isinstance(part, str) and part in S.UNION_TAGS:
            cls = S.UNION_TAGS[part]
            continue
        if isinstance(part, int):
            continue
        field = _field(cls, part)
        if field is None:
            return None
        keyed, models = _models_in(field.annotation)
        cls = models[0] if models else None
        if keyed and parts:
            parts.pop(0)  # the dict's own key (e.g. a stack name under `environments`)
    return cls


def _field(cls: type[BaseModel], key: Any) -> Any:
    fields = cls.model_fields
    return fields.get(key) or next((f for f in fields.values() if f.alias == key), None)


@functools.lru_cache(maxsize=None)
def _models_in(annotation: Any) -> tuple[bool, tuple[type[BaseModel], ...]]:
    """(is it a mapping keyed by the document, the model classes inside the annotation)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return False, (annotation,)
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        args = args[:1]
    found: list[type[BaseModel]] = []
    for arg in args:
        found += _models_in(arg)[1]
    return origin is dict, tuple(found)
