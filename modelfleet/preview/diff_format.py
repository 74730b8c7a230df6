"""How ``modelfleet preview --base`` shows resource changes: text for a terminal, markdown for the PR comment."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .diff import ACTIONS, SYMBOLS, PreviewDiff

PREVIEW_MARKER = "<!-- modelfleet-preview -->"  # the section's start in the PR comment
WORDS = {"create": "to create", "update": "to update", "replace": "to replace", "delete": "to delete"}
MAX_ROWS = 60  # resources listed per stack in the comment; more are counted (the job log has them all)


@dataclass(frozen=True)
class StackPreview:
    """One stack's comparison, or why there is none (a side whose program stops with errors)."""

    stack: str
    diff: PreviewDiff | None
    problem: str | None = None  # "does not compile", "new stack", ...
    bumps: tuple[str, ...] = ()  # version changes, with the workload each rolls (plan/changes.version_change)


def _counts(diff: PreviewDiff) -> str:
    parts = [f"{diff.count(a)} {WORDS[a]}" for a in ACTIONS]
    rolls = f" ({diff.node_rolls} node roll{'s' if diff.node_rolls != 1 else ''})" if diff.node_rolls else ""
    return ", ".join(parts) + rolls + f", {diff.unchanged} unchanged"


def render_preview_diff_text(previews: Sequence[StackPreview], base: str) -> str:
    lines = [f"pulumi up against {base}'s program output (offline: both sides under Pulumi's mocks, as first "
             "deploys; the live state is not read)", ""]
    for p in previews:
        if p.diff is None:
            lines += [f"{p.stack}: {p.problem}", ""]
            continue
        lines.append(f"{p.stack}: {_counts(p.diff)}")
        lines += [f"  {b}" for b in p.bumps]  # "fraud-scorer: version 1 -> 2, rolls ..."
        for c in p.diff.changes:
            lines.append(f"  {SYMBOLS[c.action]:2} {c.type} {c.name}")
            lines += [f"       {d}" for d in c.changes] + [f"       ! {n}" for n in c.notes]
        lines.append("")
    return "\n".join(lines)


def render_preview_diff_markdown(previews: Sequence[StackPreview], base: str) -> str:
    lines = [PREVIEW_MARKER, f"### Offline preview: what `pulumi up` would change against `{base}`", "",
             "Both branches' Pulumi programs run under Pulumi's mocks (no AWS credentials), as first deploys; "
             "the live state is not read. ➕ create, 🔄 update, ♻️ replace (delete and create again), ➖ delete.", "",
             "| stack | ➕ | 🔄 | ♻️ | ➖ | node rolls | unchanged |", "|---|---:|---:|---:|---:|---:|---:|"]
    for p in previews:
        if p.diff is None:
            lines.append(f"| {p.stack} | {p.problem} | | | | | |")
            continue
        d = p.diff
        lines.append(f"| {p.stack} | {d.count('create')} | {d.count('update')} | {d.count('replace')} | "
                     f"{d.count('delete')} | {d.node_rolls} | {d.unchanged} |")
    for p in previews:
        if p.diff is not None and p.diff.changes:
            lines += ["", *[f"- **{p.stack}**: {_cell(b)}" for b in p.bumps], *_stack_md(p.diff)]
    return "\n".join(lines) + "\n"


ICONS = {"create": "➕", "update": "🔄", "replace": "♻️", "delete": "➖"}


def _stack_md(diff: PreviewDiff) -> list[str]:
    warn = diff.count("replace") + diff.count("delete") + diff.node_rolls
    lines = [f"<details{' open' if warn else ''}><summary><b>{diff.stack}</b>: {_counts(diff)}</summary>", "",
             "| | resource | what changes |", "|---|---|---|"]
    for c in diff.changes[:MAX_ROWS]:
        what = "; ".join([f"`{_cell(d)}`" for d in c.changes] + [f"⚠️ {_cell(n)}" for n in c.notes]) or c.action + "d"
        lines.append(f"| {ICONS[c.action]} | {c.type} `{c.name}` | {what} |")
    if len(diff.changes) > MAX_ROWS:
        lines.append(f"| | and {len(diff.changes) - MAX_ROWS} more | `modelfleet preview --base` lists them all |")
    return lines + ["", "</details>"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("`", "'")
