"""The ``modelfleet`` script ends without tearing its objects down one by one (cli.exit_promptly), yet as Python
would end it: the exit code, the streams flushed, every exit handler run, other threads waited for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT


def python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60)


@pytest.mark.parametrize("code", [0, 2, 3])
def test_the_code_the_streams_and_the_exit_handlers_are_kept(code):
    result = python(
        "import atexit, sys\n"
        "atexit.register(lambda: print('handler ran', flush=False))\n"
        "from modelfleet.cli import exit_promptly\n"
        "print('out', end='')\n"  # buffered: only the flush writes it
        "print('err', end='', file=sys.stderr)\n"
        f"exit_promptly({code})\n"
        "print('never')\n")
    assert (result.returncode, result.stdout, result.stderr) == (code, "outhandler ran\n", "err")


def test_a_thread_still_running_is_waited_for_as_python_does():
    result = python(
        "import threading, time\n"
        "from modelfleet.cli import exit_promptly\n"
        "threading.Thread(target=lambda: (time.sleep(0.3), print('thread done'))).start()\n"
        "exit_promptly(4)\n")
    assert (result.returncode, result.stdout) == (4, "thread done\n")


def test_the_script_keeps_its_exit_codes():
    """`python -m modelfleet` (the ordinary exit) and the installed script (cli.entry) alike."""
    ok = subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(ROOT), "validate"],
                        capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert ok.returncode == 0 and "models valid" in ok.stdout, ok.stderr
    refused = subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(ROOT), "plan", "--stack", "nope"],
                             capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert refused.returncode == 2 and "no stack named 'nope'" in refused.stderr
    script = str(Path(sys.executable).parent / "modelfleet")
    refused = subprocess.run([script, "--project", str(ROOT), "plan", "--stack", "nope"],
                             capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert refused.returncode == 2 and "no stack named 'nope'" in refused.stderr
    listed = subprocess.run([script, "--project", str(ROOT), "stacks"], capture_output=True, text=True, cwd=ROOT,
                            timeout=300)
    assert listed.returncode == 0 and "prod" in listed.stdout, listed.stderr


def test_a_profiler_still_sees_the_end_of_the_program(tmp_path):
    """Under a profiler (or tracer) the ordinary exit runs, so the tool writes what it gathered."""
    out = tmp_path / "profile.out"
    result = python(
        "import cProfile, sys\n"
        "from modelfleet.cli import exit_promptly\n"
        f"cProfile.run('exit_promptly(0)', {str(out)!r})\n")
    assert result.returncode == 0 and out.stat().st_size > 0, result.stderr
