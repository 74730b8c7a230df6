"""Ctrl-C (SIGINT) in any command: exit code 130 and one line on stderr, never a traceback (defect 3 of #17).

The signal is delivered deterministically from inside the command: a trace hook sends SIGINT to the process
when the named function is first called, so each case interrupts a known step (reading YAML, compiling,
writing the output, running the Pulumi program under mocks) of the real CLI in a real process.
`serve` handles its own signals (it must stop tritonserver first): tests/engines/test_serve_cli.py.

Start-up is covered by generated instants: the real program (`python -m modelfleet`, and the installed
`modelfleet` script) gets SIGINT at the Nth import, or the Nth call of one of modelfleet's functions, counted
from the moment modelfleet's own code starts running; N is drawn over the whole run. (Before that, the
interpreter is still starting, site and .pth files, or importing the package before its first line: no code
of modelfleet's has run yet, so only Python's own handler can answer.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# Installed as sitecustomize: sends SIGINT at the Nth import (audit event) or the Nth call of a function in
# modelfleet/, counted from modelfleet's first own import; N=0 counts them and writes the total at exit. Only
# the command's own process counts: the workers it forks (plan/prewarm.py) inherit the hooks, and a terminal's
# Ctrl-C reaches them with the command (they ignore it: the command stops them).
TRIGGER = """
import atexit, os, signal, sys

KIND, N, FIRED = os.environ["TRIGGER_KIND"], int(os.environ["TRIGGER_AT"]), os.environ["TRIGGER_FIRED"]
seen = [0, False]
MAIN = os.getpid()

def count():
    if not seen[1] or os.getpid() != MAIN:
        return
    seen[0] += 1
    if seen[0] == N:
        open(FIRED, "w").close()
        os.kill(os.getpid(), signal.SIGINT)

def on_import(event, args):  # once modelfleet's package body runs (the script imports modelfleet.cli first)
    if event == "import":
        seen[1] = seen[1] or "modelfleet" in sys.modules
        count()

def on_call(frame, event, arg):  # after the first instant of the package's body, its own frame
    if event == "call" and "/modelfleet/" in frame.f_code.co_filename:
        if seen[1]:
            count()
        seen[1] = True

if KIND == "import":
    sys.addaudithook(on_import)
else:
    sys.setprofile(on_call)
if N == 0:
    atexit.register(lambda: open(FIRED, "w").write(str(seen[0])))
"""
LINES = (["modelfleet: interrupted"], ["modelfleet validate: interrupted"])


def _program(how: str) -> list[str]:
    script = Path(sys.executable).with_name("modelfleet")
    if how == "script" and not script.exists():
        pytest.skip("no installed modelfleet script next to this Python")
    return [str(script)] if how == "script" else [sys.executable, "-m", "modelfleet"]


def _run_with_trigger(tmp: Path, how: str, kind: str, at: int) -> tuple[subprocess.CompletedProcess, Path]:
    (tmp / "sitecustomize.py").write_text(TRIGGER)
    fired = tmp / f"fired-{kind}-{at}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp), str(ROOT)]), "TRIGGER_KIND": kind,
           "TRIGGER_AT": str(at), "TRIGGER_FIRED": str(fired)}
    result = subprocess.run([*_program(how), "--project", str(ROOT), "validate"], capture_output=True, text=True,
                            cwd=tmp, env=env, timeout=120)
    return result, fired


@pytest.fixture(scope="module")
def totals(tmp_path_factory) -> dict[str, int]:
    """How many imports and calls a whole `validate` makes, counted as the trigger counts them."""
    out = {}
    for kind in ("import", "call"):
        result, fired = _run_with_trigger(tmp_path_factory.mktemp("count"), "module", kind, 0)
        assert result.returncode == 0, result.stderr
        out[kind] = int(fired.read_text())
    assert out["import"] > 100 and out["call"] > 1000, out
    return out


@settings(max_examples=24, deadline=None)
@given(kind=st.sampled_from(["import", "import", "call"]), fraction=st.floats(0, 1), how=st.sampled_from(["module", "script"]))
def test_ctrl_c_at_any_instant_of_start_up_is_one_line(tmp_path_factory, totals, kind, fraction, how):
    at = 1 + round(fraction * (totals[kind] - 1))
    result, fired = _run_with_trigger(tmp_path_factory.mktemp("run"), how, kind, at)
    if not fired.exists():  # a run can import or call a little less than the counted one: nothing was sent
        assert result.returncode == 0, result.stderr
        return
    assert result.returncode == EXIT_INTERRUPTED, (kind, at, result.stderr)
    assert result.stderr.splitlines() in LINES, (kind, at, result.stderr)
