"""``modelfleet profile --llm``: a REAL vLLM (CPU build, the tiny random Llama) measured by vLLM's own
``vllm bench serve``, the measured block written into models.yaml, and the next plan reporting it.

Runs where vLLM is importable by this interpreter (``.venv-vllm``; .ci/run's vLLM step). The command is a
subprocess, as a user runs it, on a copy of the example project, so the repository's models.yaml is never
touched. About a minute: vLLM starts in 20-60 s, the benchmark itself takes a few seconds.
"""

from __future__ import annotations

import difflib
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from modelfleet.project import Project
from modelfleet.spec.profiles import LLM_MEASURED
from tests.conftest import ROOT
from tests.engines.local_vllm import LLM, require_vllm

pytestmark = pytest.mark.engine("vllm")

require_vllm()


def test_profile_llm_writes_the_measured_block_and_the_next_plan_reports_it(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    shutil.copy(ROOT / "models.yaml", project / "models.yaml")
    shutil.copytree(ROOT / "stacks", project / "stacks")
    shutil.copytree(ROOT / "samples", project / "samples")  # warmup samples models.yaml names
    before = (project / "models.yaml").read_text()
    command = [sys.executable, "-m", "modelfleet", "--project", str(project), "profile", "--stack", "dev",
               "--llm", LLM, "--concurrency", "2", "--input-tokens", "64", "--output-tokens", "16",
               "--requests", "16", "--date", "2026-01-02", "--workdir", str(tmp_path / "work")]
    started = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"})
    seconds = time.monotonic() - started
    assert done.returncode == 0, done.stdout + done.stderr
    assert "TINY RANDOM model" in done.stdout and "vllm bench serve: 16 requests of 64 tokens in, 16 out" in done.stdout
    print(f"profile --llm took {seconds:.0f} s:\n{done.stdout}")

    after = (project / "models.yaml").read_text().splitlines()
    changes = difflib.SequenceMatcher(None, before.splitlines(), after).get_opcodes()
    (insert,) = [c for c in changes if c[0] != "equal"]  # one block added, every other line (comments too) kept
    added = after[insert[3]:insert[4]]
    assert insert[0] == "insert" and [line.split(":")[0].strip() for line in added] == ["profile", *LLM_MEASURED]

    spec = Project(str(project)).fleet().model(LLM).profile
    assert (spec.measured_on, spec.measured_at, spec.tensor_parallel, spec.concurrency) == ("cpu", "2026-01-02", 1, 2)
    assert (spec.input_tokens, spec.output_tokens) == (64, 16)
    assert 0 < spec.ttft_median_ms <= spec.ttft_p99_ms and 0 < spec.tpot_median_ms <= spec.tpot_p99_ms
    assert spec.output_tokens_per_s > 0

    measured = Project(str(project)).plan("dev").model(LLM).measured
    assert measured is not None and measured.ttft_p99_ms == spec.ttft_p99_ms and not measured.applies
    assert measured.verdict.startswith("measured on cpu tp=1, not on this plan's")  # a CPU run checks nothing
