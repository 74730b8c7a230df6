"""The LLMs' simulations kept on disk between commands: `modelfleet plan`, then `render`, then `preview` run the
same simulations once, not three times.

A simulation is a pure function of its key (plan/llm/speed/peak.py ``simulation_key``: the GPU's constants,
the shape, the layout, a measured profile's correction, the traffic, the engine settings, the seed and the
request count, all by value) and of the simulator's code. So an entry is stored under the SHA-256 of its key's
``repr`` in a directory named by the digest of every source of ``plan/llm/speed/`` (a changed simulator or step
time reads none of the old entries; the older directories are removed when a new one is made), and it carries
its key's text, compared on every read: a collision, a truncated or a hand-edited file is a miss, never a
figure. Nothing is decided here; a plan is byte-identical with the cache cold, warm, or off.

Where: ``MODELFLEET_CACHE_DIR``, else ``$XDG_CACHE_HOME/modelfleet``, else ``~/.cache/modelfleet``;
``MODELFLEET_CACHE=off`` turns it off. Writes are atomic (a temporary file renamed into place), so concurrent
commands and forked workers share it safely; a cache that cannot be written (read-only, full) is skipped.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

from .plan.llm.speed.peak import RESULT_FIELDS, SIMULATIONS, SimulationKey, result_values
from .plan.llm.speed.simulation import SimulationResult

SPEED_SOURCES = Path(__file__).parent / "plan" / "llm" / "speed"
VERSION_NAME = re.compile(r"^simulations-[0-9a-f]{16}$")
_ABSENT = object()


def code_digest() -> str:
    """The SHA-256 of every source of plan/llm/speed/ (the simulator, the step time, the performance model, the
    traffic), by file name: the version of the stored figures."""
    digest = hashlib.sha256()
    for path in sorted(SPEED_SOURCES.glob("*.py")):
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cache_root(environ: Mapping[str, str]) -> Path | None:
    """The cache's directory from the environment (module docstring), or None when it is turned off."""
    if environ.get("MODELFLEET_CACHE", "").strip().lower() in ("off", "0", "no", "false"):
        return None
    if environ.get("MODELFLEET_CACHE_DIR"):
        return Path(environ["MODELFLEET_CACHE_DIR"])
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "modelfleet"


class DiskStore:
    """Simulation results under ``root``, one JSON file each (module docstring)."""

    def __init__(self, root: Path, digest: str | None = None) -> None:
        self.version = f"simulations-{(digest or code_digest())[:16]}"
        self.root = root
        self.directory = root / self.version
        self.writable = True

    def prune(self) -> None:
        """Remove the other versions' directories (only directories this module names)."""
        with contextlib.suppress(OSError):
            for entry in self.root.iterdir():
                if entry.is_dir() and VERSION_NAME.match(entry.name) and entry.name != self.version:
                    shutil.rmtree(entry, ignore_errors=True)

    def _path(self, text: str) -> Path:
        name = hashlib.sha256(text.encode()).hexdigest()
        return self.directory / name[:2] / f"{name}.json"

    def get(self, key: SimulationKey, default: object = None) -> object:
        text = repr(key)
        try:
            stored = json.loads(self._path(text).read_text())
        except (OSError, ValueError):
            return default
        if not isinstance(stored, dict) or stored.get("key") != text or "result" not in stored:
            return default
        result = stored["result"]
        if result is None:
            return None
        if (not isinstance(result, dict) or set(result) != set(RESULT_FIELDS)
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
                           for v in result.values())):
            return default
        return SimulationResult(**result)

    def put(self, key: SimulationKey, result: SimulationResult | None) -> None:
        if not self.writable:
            return
        text = repr(key)
        path = self._path(text)
        document = {"key": text, "result": None if result is None else result_values(result)}
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".", suffix=".tmp")
            try:
                with os.fdopen(handle, "w") as out:
                    json.dump(document, out, allow_nan=False)
                os.replace(temporary, path)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
        except (OSError, ValueError):
            self.writable = False  # read-only or full: the rest of this command runs without writing


@contextlib.contextmanager
def simulation_cache(root: Path | None) -> Iterator[DiskStore | None]:
    """The process's simulation memo backed by a DiskStore under ``root`` while the block runs (None: no disk)."""
    if root is None or SIMULATIONS.store is not None:  # off, or a caller's store already in place
        yield SIMULATIONS.store
        return
    store = DiskStore(root)
    store.prune()
    SIMULATIONS.store = store
    try:
        yield store
    finally:
        SIMULATIONS.store = None
