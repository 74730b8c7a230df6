"""The compiler core never imports pulumi or boto3 and does no network I/O.

Statically: no core module imports them (an AST walk). Dynamically: in a fresh interpreter where importing
pulumi/boto3 fails and opening a socket raises, the whole example still loads, compiles and renders.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT

PACKAGE = ROOT / "modelfleet"
# Edge adapters: the CLI, local engines, the price refresher and the offline Pulumi preview may do I/O.
EDGE = ("cli.py", "commands/", "engines/", "preview", "__main__.py")
FORBIDDEN = ("pulumi", "pulumi_aws", "pulumi_kubernetes", "boto3", "botocore", "requests", "socket", "urllib",
             "http", "subprocess", "aiohttp", "httpx")


def _core_modules() -> list[Path]:
    return [p for p in sorted(PACKAGE.rglob("*.py"))
            if not any(p.relative_to(PACKAGE).as_posix().startswith(e) for e in EDGE)]


def _imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_core_modules_import_nothing_impure():
    offenders = {p.relative_to(ROOT).as_posix(): sorted(_imports(p) & set(FORBIDDEN)) for p in _core_modules()}
    assert {k: v for k, v in offenders.items() if v} == {}
    assert len(_core_modules()) >= 10


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
