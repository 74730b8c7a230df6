"""`render --out` under SIGKILL and concurrency (defects 2 and 7 of #17), in real processes.

A render is killed with SIGKILL right after each step of its output swap (a trace hook in the process sends
it when the named function returns), then `--out` must be whole: exactly the previous render or exactly the
new one, never missing, never a mix. With the exchange (Linux renameat2 RENAME_EXCHANGE) that holds at every
point. The fallback (two renames, for systems without the exchange) leaves a window with no `--out`; the next
render completes the swap before anything else, which is shown by killing that next render too, right after.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelfleet.render.outputs import MARKER
from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # renders SIGKILLed mid-write: the full tier

# argv: the function after whose return the process kills itself ("" for none), "fallback" or "exchange",
# then the CLI's arguments.
KILL_AFTER = """
import os, signal, sys
from modelfleet.cli import main
import modelfleet.render.output_swap as swap

target, mode = sys.argv[1], sys.argv[2]
if mode == "fallback":
    swap.exchange = swap.no_exchange

def tracer(frame, event, arg):
    if event == "call" and frame.f_code.co_name == target:
        return on_return
    return None

def on_return(frame, event, arg):
    if event == "return":
        os.kill(os.getpid(), signal.SIGKILL)
    return on_return

sys.settrace(tracer)
raise SystemExit(main(sys.argv[3:]))
"""
# Pauses inside the swap until the file named by argv[2] exists (argv[1] is written when it pauses).
PAUSE_IN_SWAP = """
import os, sys, time
from modelfleet.cli import main

def tracer(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "swap_in":
        open(sys.argv[1], "w").close()
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.05)
    return None

sys.settrace(tracer)
raise SystemExit(main(sys.argv[3:]))
"""
EXCHANGE_STEPS = ("stage", "exchange", "discard")
FALLBACK_STEPS = ("stage", "retire", "move_in", "discard")


def _tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in directory.rglob("*") if p.is_file()}


def run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)


def render_args(stack: str, out: Path) -> list[str]:
    return ["--project", str(ROOT), "render", "--stack", stack, "--out", str(out)]


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, dict[str, bytes]]:
    """What a complete render of dev and of prod looks like."""
    where = tmp_path_factory.mktemp("complete")
    out = {}
    for stack in ("dev", "prod"):
        result = run(KILL_AFTER, "", "exchange", *render_args(stack, where / stack), cwd=where)
        assert result.returncode == 0, result.stderr
        out[stack] = _tree(where / stack)
    return out


def _kill_render(tmp_path: Path, step: str, mode: str) -> tuple[Path, subprocess.CompletedProcess]:
    out = tmp_path / "out"
    first = run(KILL_AFTER, "", mode, *render_args("dev", out), cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    killed = run(KILL_AFTER, step, mode, *render_args("prod", out), cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    return out, killed


@pytest.mark.parametrize("step", EXCHANGE_STEPS)
def test_a_render_killed_at_any_step_of_the_exchange_leaves_out_whole(tmp_path: Path, trees, step: str):
    out, _ = _kill_render(tmp_path, step, "exchange")
    assert _tree(out) in (trees["dev"], trees["prod"])  # whole: the old render or the new one
    assert _tree(out) == (trees["dev"] if step == "stage" else trees["prod"])
    again = run(KILL_AFTER, "", "exchange", *render_args("prod", out), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert _tree(out) == trees["prod"] and os.listdir(tmp_path) == ["out"]  # the killed run's leftovers removed


@pytest.mark.parametrize("step", FALLBACK_STEPS)
def test_the_fallback_swap_is_completed_by_the_next_render(tmp_path: Path, trees, step: str):
    out, _ = _kill_render(tmp_path, step, "fallback")
    if step == "retire":  # the one window without the exchange: the old output is set aside, the new one staged
        assert not out.exists()
    else:
        assert _tree(out) == (trees["dev"] if step == "stage" else trees["prod"])
    # the next render completes the interrupted swap first: killed right after staging its own output, it
    # leaves the killed run's complete render in place
    nxt = run(KILL_AFTER, "stage", "fallback", *render_args("dev", out), cwd=tmp_path)
    assert nxt.returncode == -signal.SIGKILL
    assert _tree(out) == (trees["dev"] if step == "stage" else trees["prod"])
    last = run(KILL_AFTER, "", "fallback", *render_args("dev", out), cwd=tmp_path)
    assert last.returncode == 0, last.stderr
    assert _tree(out) == trees["dev"] and os.listdir(tmp_path) == ["out"]


def test_a_concurrent_render_is_refused_and_names_the_other(tmp_path: Path, trees):
    """Defect 7 of #17: two renders into one --out collided with "No such file or directory"."""
    out, paused, go = tmp_path / "out", tmp_path / "paused", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen([sys.executable, "-c", PAUSE_IN_SWAP, str(paused), str(go), *render_args("prod", out)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    try:
        deadline = time.monotonic() + 60
        while not paused.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert paused.exists(), first.communicate()[1]
        second = run(KILL_AFTER, "", "exchange", *render_args("dev", out), cwd=tmp_path)
        assert second.returncode == 2 and "Traceback" not in second.stderr
        line = second.stderr.splitlines()[0]
        assert line.startswith(f"{out}: another render is writing it: pid {first.pid} (")
        assert f"render --stack prod --out {out}" in line and "wait for it to finish" in line
        go.touch()
        assert first.wait(60) == 0
    finally:
        go.touch()
        if first.poll() is None:
            first.kill()
        first.wait()
    assert _tree(out) == trees["prod"]
    assert json.loads((out / "plan.json").read_text())["environment"] == "prod" and (out / MARKER).is_file()
    assert sorted(os.listdir(tmp_path)) == ["go", "out", "paused"]  # no lock or staging left behind
