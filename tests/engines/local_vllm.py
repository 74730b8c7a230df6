"""What the tests that drive ``modelfleet serve --llm`` and ``profile --llm`` on the REAL vLLM (CPU build) share:
the guard that skips (or, where CI requires vLLM, fails) a module without vLLM, the example LLM they serve,
the line the command prints once it serves, and the command itself as a user runs it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from tests.conftest import ROOT
from tests.engines.conftest import engine_unavailable

LLM = "llama-3-1-8b-instruct"
READY_LINE = "Ctrl-C, SIGTERM or SIGHUP stops it"
LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never through a proxy


def require_vllm() -> None:
    """Call at module level: vLLM must be importable by this interpreter (``.venv-vllm``)."""
    if importlib.util.find_spec("vllm") is None:
        engine_unavailable("vllm", "vLLM is not installed for this Python: bash scripts/setup-vllm.sh, then run "
                                   "this test with .venv-vllm/bin/python")


def serve_llm(cwd: Path, new_session: bool = False) -> subprocess.Popen:
    """``modelfleet serve --stack dev --llm LLM`` in ``cwd`` (its workdir under it), output on one pipe."""
    command = [sys.executable, "-m", "modelfleet", "--project", str(ROOT), "serve", "--stack", "dev", "--llm", LLM,
               "--workdir", str(cwd / "work")]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=cwd,
                            env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"},
                            start_new_session=new_session)


def post_json(url: str, body: dict, timeout: float = 60) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with LOOPBACK.open(request, timeout=timeout) as response:
        return json.loads(response.read())
