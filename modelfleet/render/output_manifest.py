"""The render marker: proof that a directory is a render's, and the list of what that render wrote.

``render --out DIR`` replaces DIR as a whole, so before it does, everything in DIR must be something the
previous render wrote, unchanged: the marker lists each file with its SHA-256, and anything else (a ``.git``,
a ``kustomization.yaml``, an edited manifest, an empty directory of the user's) makes the render refuse and
name it. A marker of an older release lists nothing; then what this render is about to write is taken as
the previous render's too (the same compiler writes the same paths) and anything else is refused.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable, Mapping

MARKER = ".modelfleet-render"
HEADER = (b"This directory was written by `modelfleet render`. The next render replaces what it wrote (listed\n"
          b"below with each file's SHA-256) and refuses to run while anything else is here.\n")
_ENTRY = re.compile(rb"^([0-9a-f]{64})  (.+)$")
SHOWN = 8  # entries named in the error; the rest are counted


def marker_text(files: Mapping[str, bytes]) -> bytes:
    """The marker for ``files`` (relative path -> content), sorted: the same render, the same bytes."""
    lines = [f"{hashlib.sha256(data).hexdigest()}  {path}".encode() for path, data in sorted(files.items())]
    return HEADER + b"\n".join(lines) + (b"\n" if lines else b"")


def listed_files(marker: bytes) -> dict[str, str] | None:
    """Relative path -> SHA-256 of what the render wrote; None for an older release's marker (no list)."""
    entries = [m.groups() for m in map(_ENTRY.match, marker.splitlines()) if m]
    if not entries:
        return None
    return {path.decode(): digest.decode() for digest, path in entries}


def foreign_entries(directory: str, about_to_write: Iterable[str]) -> tuple[list[str], list[str]]:
    """What in ``directory`` (a previous render's) the render did not write, and which of its files changed.

    Directories wholly not the render's are named once (``.git/``); symbolic links and empty directories are
    never the render's."""
    with open(os.path.join(directory, MARKER), "rb") as handle:
        listed = listed_files(handle.read())
    digests = listed if listed is not None else dict.fromkeys(os.path.normpath(p) for p in about_to_write)
    parents = {os.path.dirname(p) for path in digests for p in _ancestors(path)}
    foreign, changed = [], []
    for top, dirs, files in os.walk(directory):
        relative = os.path.relpath(top, directory)
        for name in sorted(dirs):
            path = os.path.normpath(os.path.join(relative, name))
            if path not in parents or os.path.islink(os.path.join(top, name)):
                foreign.append(f"{path}/ (a directory)" if not os.path.islink(os.path.join(top, name)) else path)
                dirs.remove(name)
        for name in sorted(files):
            path = os.path.normpath(os.path.join(relative, name))
            if path == MARKER:
                continue
            if path not in digests or os.path.islink(os.path.join(top, name)):
                foreign.append(path)
            elif digests[path] is not None and _digest(os.path.join(top, name)) != digests[path]:
                changed.append(path)
    return sorted(foreign), sorted(changed)


def describe(foreign: list[str], changed: list[str]) -> str:
    """``.git/ (a directory), kustomization.yaml; and plan.json changed since it was written``."""
    parts = []
    if foreign:
        parts.append(f"it holds what `modelfleet render` did not write: {_names(foreign)}")
    if changed:
        parts.append(f"{_names(changed)} changed since it was written")
    return "; and ".join(parts)


def _names(paths: list[str]) -> str:
    shown = ", ".join(paths[:SHOWN])
    return shown + (f" and {len(paths) - SHOWN} more" if len(paths) > SHOWN else "")


def _ancestors(path: str) -> list[str]:
    """``a/b/c.txt`` -> ``[a/b/c.txt, a/b, a]``: the path and its directories (for ``dirname`` above)."""
    out = [path]
    while os.path.dirname(out[-1]):
        out.append(os.path.dirname(out[-1]))
    return out


def _digest(path: str) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
    return sha.hexdigest()
