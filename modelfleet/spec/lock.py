"""The placement lock, ``modelfleet.lock.yaml`` beside models.yaml: where each model was placed, per stack.

A compile against the lock keeps every placement it records that still holds (plan/lock.py), so a pull request
moves only the models it names, as a package manager's lock keeps the versions nobody asked to change. It is an
*input* of the pure compiler, read here with located errors; ``plan --write-lock`` and ``render`` write it
(commands/lock.py), atomically. One section per stack, keys sorted: a reviewer reads its diff.

    stacks:
      dev:
        classic:                       # a Triton model: its server, pool, node group, instance type
          fraud-scorer: {server: triton-c7i-xlarge, pool: c7i-xlarge, node_group: cpu-c7i-xlarge-spot,
                         instance_type: c7i.xlarge, digest: 3f2a...}
        llms:                          # an LLM: its instance type and layout (replicas follow the load)
          chat-8b: {instance_type: g6e.xlarge, node_group: gpu-g6e-xlarge-spot, tp: 1, pp: 1, ep: false,
                    precision: bf16, digest: 9c1b...}
        servers:                       # a Triton server's name stays what the lock says
          triton-g5-xlarge: {pool: g5-xlarge, instance_type: g5.xlarge, models: [a, b]}
        node_groups:                   # the team tag a shared group keeps (plan/teams.py)
          gpu-g5-xlarge-spot: {instance_type: g5.xlarge, teams: [search, vision]}

``digest``: of the model's spec as the stack compiles it (plan/lock.py): a model whose digest differs was
changed by the pull request, and is placed afresh.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Annotated

from pydantic import Field, ValidationError

from ..errors import Issue, SpecError
from .issues import issues_from_validation
from .tensors import LIST, Frozen
from .yaml_source import parse_yaml, safe_dump

LOCK_FILE = "modelfleet.lock.yaml"
REGENERATE = "regenerate it: modelfleet plan --stack S --write-lock (or delete it: every stack then re-solves)"
Names = Annotated[tuple[str, ...], Field(default=(), **LIST)]


class ClassicLock(Frozen):
    server: str
    pool: str
    node_group: str
    instance_type: str
    digest: str


class LlmLock(Frozen):
    instance_type: str
    node_group: str
    tp: Annotated[int, Field(ge=1)]
    pp: Annotated[int, Field(ge=1)]
    ep: bool
    precision: str
    digest: str


class ServerLock(Frozen):
    pool: str
    instance_type: str
    models: Names


class NodeGroupLock(Frozen):
    instance_type: str
    teams: Names


class StackLock(Frozen):
    classic: dict[str, ClassicLock] = Field(default_factory=dict)
    llms: dict[str, LlmLock] = Field(default_factory=dict)
    servers: dict[str, ServerLock] = Field(default_factory=dict)
    node_groups: dict[str, NodeGroupLock] = Field(default_factory=dict)


class PlacementLock(Frozen):
    stacks: dict[str, StackLock] = Field(default_factory=dict)

    def stack(self, name: str) -> StackLock | None:
        return self.stacks.get(name)


def lock_path(models_path: str) -> str:
    """The lock beside models.yaml."""
    return os.path.join(os.path.dirname(os.path.abspath(models_path)), LOCK_FILE)


def parse_lock(text: str, filename: str) -> PlacementLock:
    """A lock's text; every problem located (file:line:col), raised once as a SpecError."""
    doc = parse_yaml(text, filename)
    if doc.data is None:
        return PlacementLock()
    if doc.issues:
        raise SpecError(list(doc.issues))
    try:
        return PlacementLock.model_validate(doc.data)
    except ValidationError as exc:
        raise SpecError([dataclasses.replace(i, fix=f"{i.fix}; or {REGENERATE}" if i.fix else REGENERATE)
                         for i in issues_from_validation(doc, exc)]) from None


def load_lock(models_path: str) -> PlacementLock | None:
    """The lock beside ``models_path``, or None without one (then every stack compiles as without a lock)."""
    path = lock_path(models_path)
    if not os.path.isfile(path):
        return None
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Issue(path, 0, 0, "", f"cannot read the lock: {exc}", REGENERATE)]) from None
    return parse_lock(text, path)


HEADER = ("# The placement lock (docs/operations/placement-lock.md): where each model runs, per stack. Written by\n"
          "# `modelfleet plan --stack S --write-lock` and `modelfleet render`; commit it beside models.yaml.\n")


def dump_lock(lock: PlacementLock) -> bytes:
    """The lock as YAML: keys sorted, one entry per line, so a pull request's diff names what moved."""
    data = lock.model_dump(mode="json")
    return (HEADER + safe_dump(data, sort_keys=True, default_flow_style=False, width=120)).encode()


def with_stack(lock: PlacementLock | None, stack: str, section: StackLock) -> PlacementLock:
    """``lock`` with ``stack``'s section replaced (the other stacks' kept as they are)."""
    stacks = dict((lock or PlacementLock()).stacks)
    stacks[stack] = section
    return PlacementLock(stacks=dict(sorted(stacks.items())))
