"""Random and mutated catalogues for the fuzz test (CI) and bench/fuzz.py (a larger budget)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from modelfleet.catalogue import parse_fleet_text
from modelfleet.compiler import compile_fleet
from modelfleet.environment import EnvironmentSpec
from modelfleet.errors import CompileError, SpecError
from modelfleet.instances import InstanceCatalogue

EXAMPLE = yaml.safe_load((Path(__file__).resolve().parents[2] / "models.yaml").read_text())
ENVIRONMENTS = (EnvironmentSpec(name="prod", region="us-east-1"),
                EnvironmentSpec(name="dev", region="us-east-1", capacity_type="spot",
                                instance_families=("g4dn", "g5", "g6", "g6e"), replicas={"single_replica": True}))
STACKS = ("dev", "staging", "prod")

weird_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10**30, max_value=10**30),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(["8B", "350M", "-1", "1e309", "no", "yes", "~", "0x1F", "1_000", "NaN", "ünï©ødé", "s3://", "fp8"]),
)
values = st.recursive(weird_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=12)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, prefix + (index,))
    return out


@st.composite
def mutated_catalogues(draw: st.DrawFn) -> str:
    """The example with a few edits: replaced values, deleted keys, new keys, or raw text damage."""
    data = copy.deepcopy(EXAMPLE)
    paths = _paths(data)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths))
        parent = data
        try:
            for part in path[:-1]:
                parent = parent[part]
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "replace":
                parent[path[-1]] = draw(values)
            elif action == "delete" and isinstance(parent, dict):
                del parent[path[-1]]
            elif isinstance(parent, dict):
                parent[draw(st.text(min_size=1, max_size=10))] = draw(values)
        except (KeyError, IndexError, TypeError):
            continue
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    damage = draw(st.sampled_from(["none", "none", "duplicate", "truncate", "insert", "deep"]))
    if damage == "duplicate":
        lines = text.splitlines()
        at = draw(st.integers(0, max(0, len(lines) - 1)))
        text = "\n".join(lines[: at + 1] + lines[at:at + 1] + lines[at + 1:]) + "\n"
    elif damage == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif damage == "insert":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["{", "]", ":", "\t", "&a ", "*a", "<<: *a\n", "\x00", "- "])) + text[at:]
    elif damage == "deep":
        text += "deep: " + "[" * 200 + "]" * 200 + "\n"
    return text


def check_outcome(text: str, catalogue: InstanceCatalogue) -> str:
    """The only allowed outcomes: a plan, or our own errors (SpecErrors with a line, CompileErrors with a path)."""
    try:
        fleet = parse_fleet_text(text, "models.yaml", known_environments=STACKS)
    except SpecError as error:
        assert error.issues and all(i.line >= 1 and i.file == "models.yaml" for i in error.issues), error
        return "spec-error"
    outcome = "plan"
    for env in ENVIRONMENTS:
        try:
            compile_fleet(fleet, env, catalogue)
        except CompileError as error:
            assert error.issues and all(i.path.startswith("models") for i in error.issues), error
            outcome = "compile-error"
    return outcome
