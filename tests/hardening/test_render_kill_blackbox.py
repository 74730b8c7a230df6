"""Defects 2 and 7 of #17 as a user sees them, hooked only on `os` calls every release of the renderer makes
(so these tests also run against the code before the fix, where they fail; test_render_kill.py steps through
the swap's own functions).

2. The swap was two renames: a SIGKILL after `--out` was renamed away left it missing. Here the render
   kills itself right after any rename that moves `--out` itself away.
7. Two renders into one `--out` collided with "No such file or directory". Here the first render pauses at
   its first fsync (while it stages, before any swap) and a second render is started.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from pathlib import Path

from tests.conftest import ROOT

pytestmark = pytest.mark.slow  # renders SIGKILLed mid-write: the full tier

KILL_WHEN_OUT_MOVES = """
import os, signal, sys
from modelfleet.cli import main
out = os.path.abspath(sys.argv[1])
real = os.rename
def rename(src, dst, *a, **k):
    real(src, dst, *a, **k)
    if os.path.abspath(os.fsdecode(src)) == out:
        os.kill(os.getpid(), signal.SIGKILL)
os.rename = rename
raise SystemExit(main(sys.argv[2:]))
"""
PAUSE_AT_FIRST_FSYNC = """
import os, sys, time
from modelfleet.cli import main
real, paused = os.fsync, []
def fsync(fd):
    if not paused:
        paused.append(1)
        open(sys.argv[1], "w").close()
        while not os.path.exists(sys.argv[2]):
            time.sleep(0.05)
    return real(fd)
os.fsync = fsync
raise SystemExit(main(sys.argv[3:]))
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def _render(out: Path, stack: str) -> list[str]:
    return ["--project", str(ROOT), "render", "--stack", stack, "--out", str(out)]


def test_out_is_never_missing_after_a_kill_during_the_swap(tmp_path: Path):
    out = tmp_path / "out"
    first = subprocess.run([sys.executable, "-m", "modelfleet", *_render(out, "dev")], env=_env(),
                           capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert first.returncode == 0, first.stderr
    killed = subprocess.run([sys.executable, "-c", KILL_WHEN_OUT_MOVES, str(out), *_render(out, "prod")],
                            env=_env(), capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert killed.returncode in (0, -signal.SIGKILL), killed.stderr
    assert (out / "plan.json").is_file(), f"--out is missing after the kill: {sorted(os.listdir(tmp_path))}"


def test_a_second_render_into_the_same_out_is_refused_naming_the_first(tmp_path: Path):
    out, paused, go = tmp_path / "out", tmp_path / "paused", tmp_path / "go"
    first = subprocess.Popen([sys.executable, "-c", PAUSE_AT_FIRST_FSYNC, str(paused), str(go), *_render(out, "prod")],
                             env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not paused.exists() and first.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert paused.exists(), first.communicate()[1]
        second = subprocess.run([sys.executable, "-m", "modelfleet", *_render(out, "dev")], env=_env(),
                                capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert second.returncode == 2 and f"pid {first.pid}" in second.stderr, second.stderr
    finally:
        go.touch()
        if first.poll() is None:
            first.wait(120)
    assert first.returncode == 0 and (out / "plan.json").is_file()
