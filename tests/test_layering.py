"""The package shows the pipeline, and nothing imports against it.

1. Stage order. Every module of ``modelfleet/`` belongs to one layer; a module may import only its own
   layer and the layers before it (relative, absolute, lazy and ``TYPE_CHECKING`` imports alike):

       errors < spec < plan < cost < render < deploy < components < project < grafana < program < engines
              < serve < preview < scaffold < commands < cli

   ``spec`` to ``deploy`` are the compiler's stages; ``project.py`` loads a project directory and drives them;
   the rest are edges (the Pulumi components and program, real engines, local serving, the offline Pulumi
   preview, the files `modelfleet init` writes, the CLI).
2. Purity. The compiler (``errors`` to ``project``) imports no pulumi, no AWS SDK and nothing that talks to
   a network or runs programs; proven statically here and at run time in a fresh interpreter.
3. Components only create. ``modelfleet/components/`` imports pulumi, the standard library and of modelfleet
   only the plan and deploy-plan types: every decision lives in the pure stages. Pulumi itself is imported
   only by the components, the program that runs them (``modelfleet/program/``, what a fleet repository's
   ``__main__.py`` calls) and the offline preview that runs the program under mocks.

4. Inside ``plan/``, sub-packages by concern, in order (a module imports its own sub-package and those before):

       base (types, names, sizing, rejection, lock) < hardware < serving < capacity < llm.speed < llm < triton < top

   ``top`` is the compiler and the checks over a whole plan (compiler, changes, pins, teams).
5. No module imports another module's private (``_``) names.

A new module or package must be placed in a layer (an unplaced one fails), and there is no exceptions list.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

PACKAGE = ROOT / "modelfleet"
COMPONENTS = PACKAGE / "components"

# (layer, the top-level modules or packages of modelfleet/ in it), in stage order.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("errors", ("errors",)),
    ("spec", ("spec",)),
    ("plan", ("plan",)),
    ("cost", ("cost",)),
    ("render", ("render",)),
    ("deploy", ("deploy",)),
    ("components", ("components",)),  # thin Pulumi components: create what the deploy plan lists
    ("project", ("project", "simcache")),  # simcache: the simulations' disk cache, which project.py drives
    ("grafana", ("grafana",)),  # dashboards' JSON built with grafana-foundation-sdk (an optional extra)
    ("program", ("program",)),  # the Pulumi program a fleet repository's __main__.py runs
    ("engines", ("engines",)),
    ("serve", ("serve",)),
    ("preview", ("preview",)),
    ("scaffold", ("scaffold",)),  # the files `modelfleet init` writes: pure text from the user's choices
    ("commands", ("commands",)),
    ("cli", ("cli", "__main__", "__init__")),  # the package's surface: it may import everything
)
CORE = ("errors", "spec", "plan", "cost", "render", "deploy", "project")
IMPURE = ("pulumi", "pulumi_aws", "pulumi_kubernetes", "boto3", "botocore", "requests", "socket", "urllib", "http",
          "subprocess", "aiohttp", "httpx", "aiconfigurator", "grafana_foundation_sdk")
COMPONENT_IMPORTS = {"modelfleet.plan.types", "modelfleet.deploy.types"}
PULUMI = ("pulumi", "pulumi_aws", "pulumi_kubernetes")
PULUMI_LAYERS = ("components", "program", "preview")  # the only importers of pulumi (rule 3)
RANK = {top: rank for rank, (_, tops) in enumerate(LAYERS) for top in tops}
LAYER_NAME = {top: name for name, tops in LAYERS for top in tops}


@dataclass(frozen=True)
class Import:
    file: str
    line: int
    text: str
    module: str  # absolute, e.g. modelfleet.plan.types


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" and len(parts) > 1 else parts)


def imports_of(path: Path, root: Path) -> list[Import]:
    """Every import in ``path`` as absolute module names; ``from pkg import name`` counts ``pkg.name`` when
    that is a module (a submodule import), else ``pkg``."""
    source = path.read_text()
    lines = source.splitlines()
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            module = ".".join(base + ([node.module] if node.module else []))
            targets = [f"{module}.{a.name}" if _is_module(root, f"{module}.{a.name}") else module for a in node.names]
        else:
            continue
        text = lines[node.lineno - 1].strip()
        found += [Import(path.relative_to(root).as_posix(), node.lineno, text, t) for t in dict.fromkeys(targets)]
    return found


def _is_module(root: Path, name: str) -> bool:
    path = root.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def top_of(module: str) -> str | None:
    """``modelfleet.plan.types`` -> ``plan``; the package itself -> ``__init__``; None outside modelfleet."""
    parts = module.split(".")
    if parts[0] != "modelfleet":
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def layer_violations(root: Path) -> list[str]:
    """Imports up the stage order, and modules in no layer, as ``file:line: text: why``."""
    problems = []
    for path in sorted((root / "modelfleet").rglob("*.py")):
        own = top_of(module_name(path, root))
        if own not in RANK:
            problems.append(f"{path.relative_to(root).as_posix()}: `{own}` is in no layer (add it to LAYERS)")
            continue
        for imp in imports_of(path, root):
            target = top_of(imp.module)
            if target is not None and RANK.get(target, len(LAYERS)) > RANK[own]:
                problems.append(f"{imp.file}:{imp.line}: {imp.text}: {LAYER_NAME[own]} imports "
                                f"{LAYER_NAME.get(target, target)}, a later stage")
    return problems


def impure_imports(root: Path) -> list[str]:
    problems = []
    for path in sorted((root / "modelfleet").rglob("*.py")):
        if LAYER_NAME.get(top_of(module_name(path, root))) not in CORE:
            continue
        for imp in imports_of(path, root):
            if imp.module.split(".")[0] in IMPURE:
                problems.append(f"{imp.file}:{imp.line}: {imp.text}: the compiler core imports {imp.module}")
    return problems


def component_violations(root: Path) -> list[str]:
    problems = []
    for path in sorted((root / "modelfleet" / "components").glob("*.py")):
        for imp in imports_of(path, root):
            first = imp.module.split(".")[0]
            allowed = (first in PULUMI or imp.module.startswith("modelfleet.components")
                       or first in sys.stdlib_module_names or imp.module in COMPONENT_IMPORTS)
            if not allowed:
                problems.append(f"{imp.file}:{imp.line}: {imp.text}: a component imports {imp.module}")
    return problems


def pulumi_importers(root: Path) -> list[str]:
    """Imports of pulumi outside the components, the program and the preview (rule 3)."""
    problems = []
    for path in sorted((root / "modelfleet").rglob("*.py")):
        if LAYER_NAME.get(top_of(module_name(path, root))) in PULUMI_LAYERS:
            continue
        for imp in imports_of(path, root):
            if imp.module.split(".")[0] in PULUMI:
                problems.append(f"{imp.file}:{imp.line}: {imp.text}: only the components, program and preview "
                                f"import pulumi")
    return problems


def test_no_module_imports_a_later_stage():
    assert layer_violations(ROOT) == []


# plan/'s sub-packages (and its top-level modules) in order: each imports only its own and the ones before.
PLAN_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("base", ("types", "names", "sizing", "rejection", "lock", "forked", "__init__")),
    ("hardware", ("hardware",)),
    ("serving", ("serving",)),
    ("capacity", ("capacity",)),
    ("llm.speed", ("llm.speed",)),
    ("llm", ("llm",)),
    ("triton", ("triton",)),
    ("top", ("compiler", "changes", "pins", "teams", "name_checks", "prewarm")),
)
PLAN_RANK = {part: rank for rank, (_, parts) in enumerate(PLAN_LAYERS) for part in parts}


def plan_part_of(module: str) -> str | None:
    """``modelfleet.plan.llm.speed.load`` -> ``llm.speed``; ``modelfleet.plan.types`` -> ``types``."""
    parts = module.split(".")
    if parts[:2] != ["modelfleet", "plan"]:
        return None
    rest = parts[2:] or ["__init__"]
    for size in (2, 1):
        if ".".join(rest[:size]) in PLAN_RANK:
            return ".".join(rest[:size])
    return rest[0]


def plan_violations(root: Path) -> list[str]:
    problems = []
    for path in sorted((root / "modelfleet" / "plan").rglob("*.py")):
        own = plan_part_of(module_name(path, root))
        if own not in PLAN_RANK:
            problems.append(f"{path.relative_to(root).as_posix()}: `{own}` is in no plan layer (add it to PLAN_LAYERS)")
            continue
        for imp in imports_of(path, root):
            target = plan_part_of(imp.module)
            if target is not None and PLAN_RANK.get(target, len(PLAN_LAYERS)) > PLAN_RANK[own]:
                problems.append(f"{imp.file}:{imp.line}: {imp.text}: plan.{own} imports plan.{target}, a later one")
    return problems


def private_imports(root: Path) -> list[str]:
    """``from modelfleet.x import _name`` across modules (a module's own privates are its business)."""
    problems = []
    for path in sorted((root / "modelfleet").rglob("*.py")):  # the components live in it
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private:
                    problems.append(f"{path.relative_to(root).as_posix()}:{node.lineno}: imports {', '.join(private)}")
    return problems


def test_plan_sub_packages_import_only_the_ones_before():
    assert len(list((PACKAGE / "plan").glob("*/__init__.py"))) >= 5
    assert plan_violations(ROOT) == []


def test_no_module_imports_another_modules_private_names():
    assert private_imports(ROOT) == []


def test_the_plan_layering_check_names_each_upward_import(tmp_path):
    root = _tree(tmp_path, {
        "modelfleet/plan/hardware/x.py": "from ..llm.search import choose\nfrom ..types import FleetPlan\n",
        "modelfleet/plan/llm/search.py": "", "modelfleet/plan/types.py": "",
        "modelfleet/plan/llm/speed/y.py": "from .. import shape\nfrom ..shape import _private\n",
        "modelfleet/plan/llm/shape.py": "",
    })
    assert plan_violations(root) == [
        "modelfleet/plan/hardware/x.py:1: from ..llm.search import choose: plan.hardware imports plan.llm, a later one",
        "modelfleet/plan/llm/speed/y.py:1: from .. import shape: plan.llm.speed imports plan.llm, a later one",
        "modelfleet/plan/llm/speed/y.py:2: from ..shape import _private: plan.llm.speed imports plan.llm, a later one"]
    assert private_imports(root) == ["modelfleet/plan/llm/speed/y.py:2: imports _private"]


def test_every_stage_is_a_package_and_few_modules_sit_at_the_top():
    tops = {p.stem for p in PACKAGE.glob("*.py")}
    assert tops <= {"__init__", "__main__", "cli", "errors", "project", "simcache"}, tops  # simcache: project.py's cache
    for stage in ("spec", "plan", "cost", "render", "deploy", "engines", "serve", "preview", "commands"):
        assert (PACKAGE / stage / "__init__.py").is_file(), stage


def test_the_compiler_core_imports_nothing_impure():
    assert impure_imports(ROOT) == []
    assert sum(1 for p in PACKAGE.rglob("*.py") if LAYER_NAME.get(top_of(module_name(p, ROOT))) in CORE) >= 40


def test_components_import_only_pulumi_the_stdlib_and_plan_types():
    assert len(list(COMPONENTS.glob("*.py"))) >= 8
    assert component_violations(ROOT) == []


def test_only_the_components_program_and_preview_import_pulumi():
    assert pulumi_importers(ROOT) == []
    assert (ROOT / "__main__.py").read_text().count("\n") <= 6  # the repository's program is the packaged one


# ------------------------------------------------------------------------------------------ the judge's judge
def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


@pytest.mark.parametrize("files,expected", [
    ({"modelfleet/cost/fleet.py": "from ..render.k8s.storage import node_disk\n",
      "modelfleet/render/k8s/storage.py": ""},
     ["modelfleet/cost/fleet.py:1: from ..render.k8s.storage import node_disk: cost imports render, a later stage"]),
    ({"modelfleet/spec/env.py": "def f():\n    from modelfleet.plan.hardware import instances\n",
      "modelfleet/plan/hardware/instances.py": ""},
     ["modelfleet/spec/env.py:2: from modelfleet.plan.hardware import instances: spec imports plan, a later stage"]),
    ({"modelfleet/plan/x.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .. import project\n",
      "modelfleet/project.py": ""},
     ["modelfleet/plan/x.py:3: from .. import project: plan imports project, a later stage"]),
    ({"modelfleet/render/x.py": "import modelfleet\n"},
     ["modelfleet/render/x.py:1: import modelfleet: render imports cli, a later stage"]),
    ({"modelfleet/newstage/x.py": "import json\n"},
     ["modelfleet/newstage/x.py: `newstage` is in no layer (add it to LAYERS)"]),
    ({"modelfleet/render/x.py": "from ..plan.types import FleetPlan\nfrom . import common\nimport yaml\n",
      "modelfleet/render/common.py": "from ..errors import Issue\n"}, []),
])
def test_the_layering_check_names_each_upward_import(tmp_path, files, expected):
    assert layer_violations(_tree(tmp_path, files)) == expected


def test_the_purity_and_component_checks_catch_what_they_forbid(tmp_path):
    root = _tree(tmp_path, {
        "modelfleet/plan/x.py": "def refresh():\n    import boto3\n",
        "modelfleet/commands/y.py": "import subprocess\n",  # an edge may
        "modelfleet/components/bad.py": "import json\nimport pulumi\nfrom modelfleet.render.k8s import node_disk\n"
                                        "from modelfleet.deploy.types import DeployPlan\nimport yaml\n",
        "modelfleet/scaffold/z.py": "import pulumi_aws as aws\n",
    })
    assert impure_imports(root) == ["modelfleet/plan/x.py:2: import boto3: the compiler core imports boto3"]
    assert component_violations(root) == [
        "modelfleet/components/bad.py:3: from modelfleet.render.k8s import node_disk: a component imports "
        "modelfleet.render.k8s",
        "modelfleet/components/bad.py:5: import yaml: a component imports yaml"]
    assert pulumi_importers(root) == [
        "modelfleet/scaffold/z.py:1: import pulumi_aws as aws: only the components, program and preview import pulumi"]


# ---------------------------------------------------------------------------------------------- at run time
SCRIPT = """
import builtins, socket, sys
real_import = builtins.__import__
def guarded(name, *args, **kwargs):
    if name.split('.')[0] in ('pulumi', 'pulumi_aws', 'pulumi_kubernetes', 'boto3', 'botocore'):
        raise ImportError('core imported ' + name)
    return real_import(name, *args, **kwargs)
builtins.__import__ = guarded
def no_network(*args, **kwargs):
    raise RuntimeError('network I/O from the compiler core')
socket.socket.connect = no_network
socket.create_connection = no_network
from modelfleet.project import Project
from modelfleet.render.fleet import render_fleet
project = Project(root=sys.argv[1])
for stack in project.stacks():
    files = render_fleet(project.plan(stack))
    assert files
print('pure')
"""


def test_compile_and_render_run_without_pulumi_boto3_or_network():
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(ROOT)], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "pure"
