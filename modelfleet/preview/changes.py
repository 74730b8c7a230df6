"""``preview --base``: what ``pulumi up`` would change against a base models.yaml, resource by resource, with
each version bump named (plan/changes.py). Both sides run the real program under the mocks; a resource is
changed when its inputs differ. Formatting only; the command runs the two previews."""

from __future__ import annotations

import json
from typing import Any

from .format import _short_type


STACK = "pulumi:pulumi:Stack"  # the stack itself: one on each side, never a change


def _key(resource: Any) -> tuple[str, str]:
    return resource.type, resource.name


def _inputs(resource: Any) -> str:
    return json.dumps(resource.inputs, sort_keys=True, default=str)


def resource_changes(base: Any, head: Any) -> tuple[list[str], int]:
    """Lines ``+``/``-``/``~ type name`` for what differs between two previews, and how many are unchanged."""
    before, after = ({_key(r): r for r in side.resources if r.type != STACK} for side in (base, head))
    lines, unchanged = [], 0
    for key in sorted(set(before) | set(after)):
        kind, name = _short_type(key[0]), key[1]
        if key not in before:
            lines.append(f"  + {kind} {name}")
        elif key not in after:
            kept = "  (retained: pods of the old revision still read it)" if before[key].retain_on_delete else ""
            lines.append(f"  - {kind} {name}{kept}")
        elif _inputs(before[key]) != _inputs(after[key]):
            lines.append(f"  ~ {kind} {name}" + _what_rolls(after[key]))
        else:
            unchanged += 1
    return lines, unchanged


def _what_rolls(resource: Any) -> str:
    kind = resource.inputs.get("kind") if isinstance(resource.inputs, dict) else None
    if kind in ("Deployment", "LeaderWorkerSet"):
        return "  (pod template: its pods roll)"
    if kind == "Rollout":
        return "  (pod template: a canary, gated by its analysis)"
    return ""


def format_changes(base_label: str, notes: list[str], base: Any, head: Any) -> str:
    lines, unchanged = resource_changes(base, head)
    out = [f"changes against the base ({base_label}; stacks, price table and program: the working tree's):"]
    out += [f"  {note}" for note in notes]
    out += lines or ["  no resource changes"]
    out.append(f"  ({unchanged} resources unchanged)")
    return "\n".join(out) + "\n"
