"""Running the real judges of the generated rules: Debian's promtool (and prometheus, for the end-to-end test).

Missing, they skip a test on a developer's machine and fail it in CI (as every judge: tests/hardening/judges.py);
scripts/setup.sh installs them.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.hardening.judges import missing


def require(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        missing(f"{name} (Debian's 'prometheus' package; scripts/setup.sh installs it)")
    return str(found)


def run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([require("promtool"), *args], capture_output=True, text=True, timeout=timeout)


def write_rules(path: Path, groups: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"groups": groups}, sort_keys=True))
    return path


def check_rules(*paths: Path) -> subprocess.CompletedProcess[str]:
    """``promtool check rules``: syntax, PromQL, durations, templates of every rule."""
    return run("check", "rules", *map(str, paths))


def recording_rules(exprs: dict[str, str]) -> list[dict[str, Any]]:
    """Queries as recording rules (``check rules`` parses a recording rule's PromQL like an alert's)."""
    return [{"name": "panels", "rules": [{"record": f"panel:{index}", "expr": expr}
                                         for index, expr in enumerate(exprs.values())]}]
