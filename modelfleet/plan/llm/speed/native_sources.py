"""Which modules the build compiles, and the digest of their sources: read by setup.py (which loads this file
by its path, before the package is importable) and by speed/__init__.py (which checks a build against it), so
both name the same sources and hash them alike. Standard library only: setup.py runs it before anything else
is installed."""

from __future__ import annotations

import hashlib
from pathlib import Path

NATIVE = ("steptime", "replica", "simulation")  # in import order: simulation imports replica, replica steptime


def source_paths(directory: Path) -> list[Path]:
    """The compiled modules' sources in ``directory`` (this package's), in NATIVE's order."""
    return [directory / f"{name}.py" for name in NATIVE]


def sources_digest(directory: Path) -> str:
    """The SHA-256 of the compiled modules' sources, concatenated in NATIVE's order."""
    digest = hashlib.sha256()
    for path in source_paths(directory):
        digest.update(path.read_bytes())
    return digest.hexdigest()
