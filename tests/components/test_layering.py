"""Components only create: they import pulumi, the standard library, and of modelfleet only the plan and
deploy-plan types (every decision lives in the pure modelfleet.deploy and modelfleet.render.k8s)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from tests.conftest import ROOT

COMPONENTS = ROOT / "components"
ALLOWED_MODELFLEET = {"modelfleet.plan.types", "modelfleet.deploy.types"}


def imported(path: Path) -> set[str]:
    """Absolute module names a file imports (relative imports stay inside components/)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def offenders(directory: Path) -> dict[str, list[str]]:
    found = {}
    for path in sorted(directory.glob("*.py")):
        bad = sorted(n for n in imported(path) if not (
            n.split(".")[0] in ("pulumi", "pulumi_aws", "pulumi_kubernetes") or n in ALLOWED_MODELFLEET
            or n.split(".")[0] in sys.stdlib_module_names))
        if bad:
            found[path.name] = bad
    return found


def test_components_import_only_pulumi_the_stdlib_and_plan_types():
    assert len(list(COMPONENTS.glob("*.py"))) >= 8
    assert offenders(COMPONENTS) == {}


def test_the_check_catches_a_component_that_decides(tmp_path):
    (tmp_path / "bad.py").write_text("import json\nimport pulumi\nfrom modelfleet.render.k8s import node_disk\n"
                                     "from modelfleet.deploy.types import DeployPlan\nimport yaml\n")
    assert offenders(tmp_path) == {"bad.py": ["modelfleet.render.k8s", "yaml"]}
