"""Running the simulator-vs-vLLM check (modelfleet/engines/simulation_check.py) on the REAL vLLM (CPU build):
shared by tests/engines/test_vllm_simulation.py (CI's size) and bench/vllm_cpu_simulation.py (repeated runs,
the table in bench/).

The engine is vLLM's API server with the arguments ``modelfleet serve --llm`` gives the dev stack's Llama
entry on this machine (modelfleet/serve/vllm_local.py; the plan is not compiled here: it simulates every
layout and takes minutes), with two changes:

- the random Llama is heavier than ``serve --llm``'s (4 layers of 512, :data:`MODEL_LAYERS`, not 2 of 128):
  the 2-layer model's decode step takes about 2 ms here, less than the API server takes to stream a token
  on this machine, so a client-side TPOT of it measured the HTTP server (whole answers arrived in one read,
  TPOT 0.004 ms); with 4 x 512 a decode step is about 10 ms and a prompt token about 0.3 ms, so the engine,
  whose scheduling is what the simulator models, is what the client waits for;
- flags so that it runs the policy the simulator models, which is also the GPU V1 scheduler's:
  ``--enable-chunked-prefill`` (V1's default, said explicitly), ``--no-async-scheduling`` (the CPU platform
  forces it off, a GPU turns it on: it overlaps scheduling with the step and changes no batch),
  ``--no-enable-prefix-caching`` (the compiled entry turns it on; the simulator has no prefix cache, and
  random prompts share a first block now and then), and ``--max-num-seqs 11 --max-num-batched-tokens 2048``
  (the dev entry's when the table was measured; fixed so that the check does not move with the plan).

The KV cache is what vLLM reports at start (``--kv-cache-memory-bytes 64M``: 8,192 tokens of this model).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from modelfleet.commands.serve_llm import running_vllm_with, vllm_environment, vllm_python
from modelfleet.engines import simulation_check as check
from modelfleet.engines.step_fit import StepFit, fit_step_time
from modelfleet.engines.vllm_bench import RESULT_FILE, LlmLoad, LlmMeasurement, bench_arguments, run_bench
from tests.conftest import ROOT
from tests.engines.local_vllm import LLM

MAX_NUM_SEQS, MAX_NUM_BATCHED_TOKENS = 11, 2048  # the dev entry's when the table was measured
# What modelfleet serve --llm passes the dev entry on this machine (modelfleet/serve/vllm_local.py), with the
# scheduling limits above and the flags that make the simulator's policy explicit (module docstring).
ENGINE_ARGS = ("--max-model-len", "2048", "--kv-cache-memory-bytes", "64M", "--dtype", "float32",
               "--max-num-seqs", str(MAX_NUM_SEQS), "--max-num-batched-tokens", str(MAX_NUM_BATCHED_TOKENS),
               "--enable-chunked-prefill", "--no-async-scheduling", "--no-enable-prefix-caching")
MODEL_LAYERS, MODEL_HIDDEN = 4, 512
WRITE_MODEL = ("import sys; from modelfleet.engines.tiny_llm import write_tiny_llama; "
               f"write_tiny_llama(sys.argv[1], layers={MODEL_LAYERS}, hidden_size={MODEL_HIDDEN})")
KV_LINE = re.compile(r"KV cache size: ([\d,]+) tokens")
BENCH_TIMEOUT_S = 600.0
NICE = -10
REQUESTS = 200  # per load: a p99 between the 198th and 199th of 200


def setup(kv_cache_tokens: int, input_tokens: int = 128, output_tokens: int = 32, range_ratio: float = 0.5,
          requests: int = REQUESTS) -> check.CheckSetup:
    """The engine's scheduling limits (:data:`ENGINE_ARGS`), its KV cache and the benchmark's lengths."""
    return check.CheckSetup(max_num_seqs=MAX_NUM_SEQS, max_num_batched_tokens=MAX_NUM_BATCHED_TOKENS,
                            kv_cache_tokens=kv_cache_tokens, input_tokens=input_tokens, output_tokens=output_tokens,
                            range_ratio=range_ratio, requests=requests)


@contextmanager
def engine(workdir: Path) -> Iterator[tuple[str, str, int]]:
    """The real vLLM serving the heavier random Llama with :data:`ENGINE_ARGS`: yields (base URL, tokenizer
    dir, KV cache tokens as vLLM reports them)."""
    python = vllm_python(None, str(ROOT))
    assert python is not None, "vLLM is not installed: bash scripts/setup-vllm.sh"
    model_dir = workdir / "tiny-llama"  # running_vllm_with serves what it finds there
    if not (model_dir / "config.json").is_file():
        subprocess.run([python, "-c", WRITE_MODEL, str(model_dir)], env=vllm_environment(), check=True)

    def arguments(model: Path, port: int) -> list[str]:
        return ["--model", str(model), "--served-model-name", LLM, "--host", "127.0.0.1", "--port", str(port),
                *ENGINE_ARGS]
    with raised_priority(), running_vllm_with(arguments, workdir, python) as (url, served):
        logs = sorted(workdir.glob("run-*/vllm.log"), key=lambda p: p.stat().st_mtime)
        found = KV_LINE.search(logs[-1].read_text(errors="replace"))
        assert found, f"no KV cache size in {logs[-1]}"
        yield url, str(served), int(found.group(1).replace(",", ""))


@contextmanager
def raised_priority() -> Iterator[None]:
    """Run the engine and the benchmark client (children inherit it) :data:`NICE` steps ahead of other
    processes: on a shared machine another session's work otherwise takes the core in the middle of a step
    or of streaming a token, a delay no step model has. Without the right to raise it (not root), as is."""
    before = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        os.setpriority(os.PRIO_PROCESS, 0, before + NICE)
    except PermissionError:
        pass
    try:
        yield
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, before)


def bench(url: str, tokenizer: str, load: LlmLoad, workdir: Path, name: str) -> LlmMeasurement:
    """One ``vllm bench serve`` run of ``load``; its JSON and log kept under ``workdir/name``."""
    python = vllm_python(None, str(ROOT))
    assert python is not None
    out = workdir / name
    arguments = bench_arguments(url, LLM, tokenizer, load, out) + ["--save-detailed"]
    return run_bench(python, vllm_environment(), arguments, out, out / "bench.log", BENCH_TIMEOUT_S)


def calibrate(url: str, tokenizer: str, spec: check.CheckSetup, workdir: Path) -> StepFit:
    """The step model fitted to this engine's single-request figures (simulation_check's step 1)."""
    observations = []
    for i, (kind, load) in enumerate(check.calibration_loads(spec)):
        measured = bench(url, tokenizer, load, workdir, f"calibrate-{i}-{kind}")
        if kind == "first_token":
            detail = json.loads((workdir / f"calibrate-{i}-{kind}" / RESULT_FILE).read_text())
            observations += check.first_token_observations(detail["input_lens"],
                                                           [s * 1000.0 for s in detail["ttfts"]])
        else:
            observations.append(check.decode_observation(load, measured))
    return fit_step_time(observations)


@dataclass(frozen=True, kw_only=True)
class LoadResult:
    fraction: float
    rate_per_s: float
    predicted: check.Figures
    measured: check.Figures
    seconds: float  # the benchmark's duration


@dataclass(frozen=True, kw_only=True)
class CheckRun:
    fit: StepFit
    capacity_per_s: float
    loads: tuple[LoadResult, ...]


def run_check(url: str, tokenizer: str, spec: check.CheckSetup, workdir: Path, seed: int) -> CheckRun:
    """Calibrate, find the capacity, then predict and measure each load of ``spec`` (Poisson, ``seed``)."""
    fit = calibrate(url, tokenizer, spec, workdir / f"seed-{seed}")
    capacity = check.capacity_per_s(fit, spec)
    results = []
    for fraction in spec.loads:
        load = check.poisson_load(spec, fraction * capacity, seed)
        predicted = check.predict(fit, spec, load.request_rate)
        measured = bench(url, tokenizer, load, workdir / f"seed-{seed}", f"poisson-{fraction}")
        results.append(LoadResult(fraction=fraction, rate_per_s=load.request_rate, predicted=predicted,
                                  measured=check.measured_figures(measured), seconds=measured.seconds))
    return CheckRun(fit=fit, capacity_per_s=capacity, loads=tuple(results))
