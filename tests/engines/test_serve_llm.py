"""``modelfleet serve --llm``: a compiled LLM entry on a REAL vLLM (CPU build) with the tiny random Llama.

Runs where vLLM is importable by this interpreter (``.venv-vllm``; .ci/run's vLLM step), since starting
vLLM takes 20-60 s here. The command is a subprocess, as a user runs it; it is always stopped.
"""

from __future__ import annotations

import re
import signal
from pathlib import Path

import pytest

from modelfleet.engines.process import group_pids, signal_group
from tests.engines.conftest import Output
from tests.engines.local_vllm import LLM, LOOPBACK, READY_LINE, post_json, require_vllm, serve_llm

pytestmark = pytest.mark.engine("vllm")

require_vllm()


def test_serve_llm_answers_completions_and_stops_cleanly(tmp_path: Path) -> None:
    process = serve_llm(tmp_path)
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
        with LOOPBACK.open(base + "/metrics", timeout=30) as response:
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
