"""``modelfleet serve --llm``: a compiled LLM entry on a REAL vLLM (CPU build) with the tiny random Llama.

Runs where vLLM is importable by this interpreter (``.venv-vllm``; .ci/run's vLLM step), since starting
vLLM takes 20-60 s here. The command is a subprocess, as a user runs it; it is always stopped.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from modelfleet.engines.process import group_pids, signal_group
from tests.conftest import ROOT
from tests.engines.conftest import Output, engine_unavailable

pytestmark = pytest.mark.engine("vllm")

if importlib.util.find_spec("vllm") is None:
    engine_unavailable("vllm", "vLLM is not installed for this Python: bash scripts/setup-vllm.sh, then run "
                               "this test with .venv-vllm/bin/python")

LLM = "llama-3-1-8b-instruct"
READY_LINE = "Ctrl-C, SIGTERM or SIGHUP stops it"
_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def post_json(url: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with _LOOPBACK.open(request, timeout=60) as response:
        return json.loads(response.read())


def test_serve_llm_answers_completions_and_stops_cleanly(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "modelfleet", "--project", str(ROOT), "serve", "--stack", "dev", "--llm", LLM,
               "--workdir", str(tmp_path / "work")]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                               cwd=tmp_path)
    output = Output(process)
    vllm_pid = None
    try:
        text = output.until(READY_LINE, 300)
        assert "TINY RANDOM model" in text and "--gpu-memory-utilization 0.90 -> --kv-cache-memory-bytes 64M" in text
        base = re.search(r"OpenAI API (http://127\.0\.0\.1:\d+)/v1", text).group(1)
        vllm_pid = int(re.search(r"vLLM pid (\d+)", text).group(1))
        answer = post_json(base + "/v1/completions", {"model": LLM, "prompt": "hello world", "max_tokens": 4,
                                                      "temperature": 0})
        assert answer["model"] == LLM and answer["usage"]["completion_tokens"] == 4
        assert isinstance(answer["choices"][0]["text"], str)
        with _LOOPBACK.open(base + "/metrics", timeout=30) as response:
            metrics = response.read().decode()
        assert "vllm:num_requests_running" in metrics
        # the canary analysis's series (#15), after one finished request, and the error reason it counts
        from modelfleet.render.analysis import VLLM_SERIES
        assert all(any(line.startswith(series + "{") for line in metrics.splitlines()) for series in VLLM_SERIES), (
            [s for s in VLLM_SERIES if s not in metrics])
        assert 'finished_reason="error"' in metrics
        process.send_signal(signal.SIGTERM)
        assert process.wait(90) == 0
        output.until("vLLM stopped", 5)
        assert group_pids(vllm_pid) == []  # the API server and its engine core are gone
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(30)
        if vllm_pid:
            signal_group(vllm_pid, signal.SIGKILL)
