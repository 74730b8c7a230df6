"""Ctrl-C (SIGINT) in any command: exit code 130 and one line on stderr, never a traceback (defect 3 of #17).

The signal is delivered deterministically from inside the command: a trace hook sends SIGINT to the process
when the named function is first called, so each case interrupts a known step (reading YAML, compiling,
writing the output, running the Pulumi program under mocks) of the real CLI in a real process.
`serve` handles its own signals (it must stop tritonserver first): tests/engines/test_serve_cli.py.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # real processes interrupted at many instants: the full tier

INTERRUPT_AT = """
import os, signal, sys
from modelfleet.cli import main

target = sys.argv[1]

def tracer(frame, event, arg):
    if event == "call" and frame.f_code.co_name == target:
        sys.settrace(None)
        os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends to the foreground process
    return None

sys.settrace(tracer)
raise SystemExit(main(sys.argv[2:]))
"""
EXIT_INTERRUPTED = 128 + signal.SIGINT  # what a shell reports for a process ended by Ctrl-C


def interrupted(function: str, *argv: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", INTERRUPT_AT, function, "--project", str(ROOT), *argv],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=120)


def _tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


@pytest.mark.parametrize(("function", "argv"), [
    ("parse_yaml", ("validate",)),
    ("compile_fleet", ("plan", "--stack", "prod")),
    ("price_stack", ("cost", "--format", "markdown")),
    ("compile_fleet", ("client", "--stack", "dev", "--out", "client.py")),
    ("render_schema", ("schema",)),
    ("compile_fleet", ("preview", "--stack", "dev")),  # inside the Pulumi program, under the SDK's event loop
], ids=["validate", "plan", "cost", "client", "schema", "preview"])
def test_ctrl_c_is_exit_130_and_one_line(tmp_path: Path, function: str, argv: tuple[str, ...]):
    result = interrupted(function, *argv, cwd=tmp_path)
    assert result.returncode == EXIT_INTERRUPTED, result.stderr
    assert result.stderr.splitlines() == [f"modelfleet {argv[0]}: interrupted"]
    assert result.stdout == "" and os.listdir(tmp_path) == []


@pytest.mark.parametrize("function", ["stage", "_fsync_files", "swap_in"])
def test_ctrl_c_during_render_leaves_the_previous_output(tmp_path: Path, function: str):
    out = tmp_path / "out"
    first = interrupted("no-such-function", "render", "--stack", "dev", "--out", str(out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    before = _tree(out)
    result = interrupted(function, "render", "--stack", "prod", "--out", str(out), cwd=tmp_path)
    assert result.returncode == EXIT_INTERRUPTED, result.stderr
    assert result.stderr.splitlines() == ["modelfleet render: interrupted"]
    assert _tree(out) == before and sorted(os.listdir(tmp_path)) == ["out"]  # no staging left behind
