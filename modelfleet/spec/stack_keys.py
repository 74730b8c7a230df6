"""The keys of a stack's ``config:`` that modelfleet reads, checked before the settings are validated.

A typo in a stack file must not silently change a fleet: an unknown ``modelfleet:`` key, a key without a
namespace, a namespace one letter off, an instance family the price table does not know (``g6ee``: the
fleet would quietly lose it) and a region that is not an AWS region's name are all located issues, each
with a did-you-mean where one is close. A real region the price table has no prices for is fine: costs
then say "unknown" (cost.py), they are never guessed.
"""

from __future__ import annotations

import difflib
import re
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import Issue
from .yaml_source import Document, Path

CONFIG_NAMESPACE = "modelfleet"
REGION_KEY = "aws:region"
# Read by the Pulumi program itself, never by the compiler: a secret (`pulumi config set --secret`).
PROGRAM_KEYS = frozenset({"hfToken"})
# Settings that come from elsewhere: the stack's name from the file name, the region from aws:region.
DERIVED_KEYS = {"name": "the stack's name comes from its file name (Pulumi.<name>.yaml)",
                "region": f"the region is read from `{REGION_KEY}`, as the AWS provider reads it"}

# Partition prefixes, an optional sub-region word (eusc-de-, us-iso-...), a direction and a number:
# the shape of every AWS region name, so a new region passes without a release of modelfleet.
REGION_PATTERN = (r"^(af|ap|ca|cn|eu|eusc|il|me|mx|sa|us)-([a-z]+-)?"
                  r"(central|north|south|east|west|northeast|northwest|southeast|southwest)-[1-9][0-9]?$")
# Only for did-you-mean: the commercial and GovCloud regions as of 2026 (never used to reject a region).
KNOWN_REGIONS = (
    "af-south-1", "ap-east-1", "ap-east-2", "ap-northeast-1", "ap-northeast-2", "ap-northeast-3", "ap-south-1",
    "ap-south-2", "ap-southeast-1", "ap-southeast-2", "ap-southeast-3", "ap-southeast-4", "ap-southeast-5",
    "ap-southeast-6", "ap-southeast-7", "ca-central-1", "ca-west-1", "cn-north-1", "cn-northwest-1",
    "eu-central-1", "eu-central-2", "eu-north-1", "eu-south-1", "eu-south-2", "eu-west-1", "eu-west-2",
    "eu-west-3", "il-central-1", "me-central-1", "me-south-1", "mx-central-1", "sa-east-1", "us-east-1",
    "us-east-2", "us-gov-east-1", "us-gov-west-1", "us-west-1", "us-west-2",
)


def region_problem(region: str) -> tuple[str, str] | None:
    """(message, fix) when ``region`` is not shaped like an AWS region's name; None when it is."""
    if re.match(REGION_PATTERN, region):
        return None
    close = difflib.get_close_matches(region.lower(), KNOWN_REGIONS, n=1, cutoff=0.75)
    fix = f"did you mean `{close[0]}`?" if close else "write an AWS region such as us-east-1 or eu-west-1"
    return f"{region!r} is not an AWS region", fix


@dataclass(frozen=True)
class Settings:
    """What a stack may set, from the settings model's fields (spec/environment.py builds it from
    ``EnvironmentSpec.model_fields`` and passes it in: this module is imported by that one, never the reverse).
    ``keys``: as written in a stack file (camelCase aliases), sorted; ``names``: the snake_case names, accepted
    too; ``kinds``: the types a setting's annotation allows, to read Pulumi's strings back."""

    keys: tuple[str, ...]
    names: frozenset[str]
    kinds: Mapping[str, frozenset[Any]]

    @classmethod
    def of(cls, fields: Mapping[str, Any]) -> Settings:
        """From a pydantic model's ``model_fields`` (name -> FieldInfo with ``alias`` and ``annotation``)."""
        settable = {name: field for name, field in fields.items() if name not in DERIVED_KEYS}
        kinds: dict[str, frozenset[Any]] = {}
        for name, field in settable.items():
            kind = frozenset({field.annotation, *typing.get_args(field.annotation)})
            kinds[name] = kind
            kinds.setdefault(field.alias or name, kind)
        return cls(tuple(sorted(f.alias or n for n, f in settable.items())), frozenset(settable), kinds)

    def __contains__(self, short: str) -> bool:
        return short in self.keys or short in self.names


def config_values(stack: str, config: dict[str, Any], source: Document, settings: Settings,
                  typed: bool = True) -> tuple[dict[str, Any], list[Issue]]:
    """The settings (``modelfleet:*`` without the namespace, ``aws:region`` as ``region``) and the keys
    that cannot be read as settings.

    ``typed``: the values are YAML's own (a stack file). Pulumi hands a program every top-level value as a
    string (``"2"``, ``"true"``; mappings and lists as JSON): with ``typed=False`` those strings are read
    back as their setting's type, which the stack file, checked strictly by the CLI, had."""
    values: dict[str, Any] = {"name": stack}
    issues = []
    for key, value in config.items():
        namespace, colon, short = str(key).partition(":")
        if key == REGION_KEY:
            values["region"] = value
        elif namespace == CONFIG_NAMESPACE and short in DERIVED_KEYS:
            issues.append(source.issue(("config", key), "modelfleet does not read this key", DERIVED_KEYS[short]))
        elif namespace == CONFIG_NAMESPACE and short not in PROGRAM_KEYS:
            if short in settings:
                values[short] = value if typed else _from_pulumi_string(settings.kinds.get(short, frozenset()), value)
            else:
                issues.append(source.issue(("config", key), "unknown setting", _closest_setting(short, settings)))
        elif not colon or _near(namespace, CONFIG_NAMESPACE):
            issues.append(_misplaced(source, str(key), short if colon else namespace, settings))
    return values, issues


def _misplaced(source: Document, key: str, short: str, settings: Settings) -> Issue:
    """A key without a namespace, or with one a typo away from ``modelfleet``."""
    message = "a config key needs a namespace" if ":" not in key else "unknown namespace"
    name = short if short in settings.keys or short in PROGRAM_KEYS else None
    fix = f"write `{CONFIG_NAMESPACE}:{name}`" if name else f"write `{CONFIG_NAMESPACE}:<setting>` or `<provider>:<key>`"
    return source.issue(("config", key), message, fix)


def _near(namespace: str, expected: str) -> bool:
    return namespace != expected and difflib.SequenceMatcher(None, namespace, expected).ratio() >= 0.8


def _closest_setting(short: str, settings: Settings) -> str:
    close = difflib.get_close_matches(short, settings.keys, n=1, cutoff=0.6)
    if close:
        return f"did you mean `{CONFIG_NAMESPACE}:{close[0]}`?"
    return f"the settings are {', '.join(f'{CONFIG_NAMESPACE}:{k}' for k in settings.keys)}"


def _from_pulumi_string(kinds: frozenset[Any], value: Any) -> Any:
    """``"2"`` for an int setting is 2, ``"true"`` for a bool one is True; anything else is left as it is."""
    if not isinstance(value, str):
        return value
    if bool in kinds and value in ("true", "false"):
        return value == "true"
    if int in kinds and re.fullmatch(r"-?[0-9]+", value):
        return int(value)
    if float in kinds and re.fullmatch(r"-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?", value):
        return float(value)
    return value


def family_issues(values: dict[str, Any], known: Iterable[str], source: Document) -> list[Issue]:
    """Every instance family a stack names (instanceFamilies, policies) that the price table lacks."""
    known = tuple(sorted(known))
    issues = []
    for path, family in _families(values):
        if family not in known:
            close = difflib.get_close_matches(family, known, n=1, cutoff=0.6)
            fix = f"did you mean `{close[0]}`?" if close else (
                "use a family the price table has, or add its instance types to the table (--prices)")
            issues.append(source.issue(path, f"unknown instance family {family!r}; the price table has "
                                             f"{', '.join(known)}", fix))
    return issues


def _families(values: dict[str, Any]) -> list[tuple[Path, str]]:
    """(location, family) for every string in the settings' family lists, as written."""
    found = []
    lists: list[tuple[Path, Any]] = [(("config", f"{CONFIG_NAMESPACE}:{k}"), values.get(k))
                                     for k in ("instanceFamilies", "instance_families")]
    policies = values.get("policies")
    if isinstance(policies, dict):
        where: Path = ("config", f"{CONFIG_NAMESPACE}:policies")
        lists += [(where + (k,), policies.get(k)) for k in ("allowedFamilies", "allowed_families")]
        rules = policies.get("forbid")
        for index, rule in enumerate(rules if isinstance(rules, list) else []):
            if isinstance(rule, dict):
                lists.append((where + ("forbid", index, "families"), rule.get("families")))
    for path, families in lists:
        if isinstance(families, (list, tuple)):
            found += [(path + (i,), f) for i, f in enumerate(families) if isinstance(f, str)]
    return found
