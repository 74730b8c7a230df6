"""How far the LLM performance model (modelfleet/plan/llm/speed/performance.py, constants from
modelfleet/data/llm_performance.yaml) is from NVIDIA AIConfigurator on points it was NOT fitted on.

Held-out models only (none of `modelfleet calibrate`'s TRAINING_MODELS), dense and MoE, TP 1-8 (some MoE points
with expert parallelism), batch 1-256, input 128-32k, output 64-2k, on every GPU AIConfigurator measured. For
each point: our prefill against AIConfigurator's TTFT of a lone request (its idle prefill), and our TPOT
against its aggregated-serving TPOT at the batch. Needs the [calibrate] extra:

    pip install -e '.[calibrate]'      # in a venv of its own: about 850 MB
    python bench/perf_model_error.py --cache bench/results/aic_heldout.json --out bench/perf_model_error.md
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import re
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from modelfleet.commands.calibrate import TRAINING_MODELS, EstimateCache, fits  # noqa: E402
from modelfleet.engines import aiconfigurator as aic  # noqa: E402
from modelfleet.plan.llm.speed.performance import Layout, LlmShape, prefill_ms, shape_from_fields, tpot_ms  # noqa: E402
from modelfleet.plan.llm.speed.calibration import load_performance_table, performance_table_from_data  # noqa: E402
from modelfleet.spec.hf_config import shape_fields  # noqa: E402

# (AIConfigurator's config name, weight bytes: DeepSeek-V3 is served in its own FP8 checkpoint).
HELD_OUT = (("meta-llama--Meta-Llama-3.1-70B", 2), ("meta-llama--Meta-Llama-3.1-405B", 2), ("Qwen--Qwen3-8B", 2),
            ("mistralai--Mixtral-8x22B-v0.1", 2),
            ("Qwen--Qwen3-235B-A22B", 2), ("deepseek-ai--DeepSeek-V3", 1))
GRID = {"tp": (1, 2, 4, 8), "batch": (1, 2, 4, 16, 64, 256), "input": (128, 512, 2000, 8192, 32768),
        "output": (64, 300, 1000, 2048)}
PER_MODEL = 12
SEED = 2026
# REFERENCE.md's figures (Llama-3.1-8B is a training model: shown, not counted).
REFERENCE = (("meta-llama--Meta-Llama-3.1-8B", "h100_sxm", 1, 1, 2000, 300),
             ("meta-llama--Meta-Llama-3.1-8B", "h100_sxm", 1, 32, 2000, 300),
             ("meta-llama--Meta-Llama-3.1-70B", "l40s", 4, 1, 8192, 300))


def model(name: str, weight_bytes: float) -> tuple[dict, LlmShape]:
    config = aic.model_config(name)
    if weight_bytes >= 2:
        config = {k: v for k, v in config.items() if k != "quantization_config"}
    return config, shape_from_fields(shape_fields(config), weight_bytes=weight_bytes)


def sample(system: str, memory_gib: float, per_model: int = PER_MODEL) -> list[aic.Point]:
    rng = random.Random(f"{SEED}-{system}")
    points = []
    for name, weight_bytes in HELD_OUT:
        _, shape = model(name, weight_bytes)
        combos = [(tp, b, i, o) for tp in GRID["tp"] for b in GRID["batch"] for i in GRID["input"]
                  for o in GRID["output"] if shape.heads % tp == 0 and fits(shape, memory_gib, tp, b, i + o)]
        for tp, b, i, o in rng.sample(combos, min(per_model, len(combos))):
            points.append(aic.Point(name, system, tp, b, i, o, expert_parallel=shape.is_moe and rng.random() < 0.3))
    return points


def measure(cache: EstimateCache, point: aic.Point) -> tuple[float, float] | str:
    """AIConfigurator's (idle TTFT, TPOT at the batch), or why it could not estimate the point."""
    config, _ = model(point.model, dict(HELD_OUT).get(point.model, 2))
    try:
        ttft1, _ = cache.estimate(config, dataclasses.replace(point, batch=1))
        _, tpot = cache.estimate(config, point)
    except Exception as exc:  # AIConfigurator lacks data for some shapes: reported, not hidden
        first_line = re.sub(r" '/tmp/[^']*'", "", str(exc).splitlines()[0])  # its temporary folder
        return f"{type(exc).__name__}: {first_line[:120]}"
    return ttft1, tpot


def compare(table, point: aic.Point, measured: tuple[float, float]) -> dict:
    _, shape = model(point.model, dict(HELD_OUT).get(point.model, 2))
    gpu = table.gpus[{v: k for k, v in aic.SYSTEMS.items()}[point.system]]
    layout = Layout(tp=point.tp, expert_parallel=point.expert_parallel)
    ttft1, tpot = measured
    ours_prefill = prefill_ms(gpu, shape, layout, point.input_tokens)
    ours_tpot = tpot_ms(gpu, shape, layout, point.batch, point.input_tokens, point.output_tokens)
    return {"point": point, "moe": shape.is_moe, "aic_prefill": ttft1, "prefill": ours_prefill,
            "aic_tpot": tpot, "tpot": ours_tpot}


def error(row: dict, kind: str) -> float:
    return row[kind] / row[f"aic_{kind}"] - 1.0


def summary(rows: list[dict], label: str) -> str:
    cells = [label, str(len(rows))]
    for kind in ("prefill", "tpot"):
        errors = [abs(error(r, kind)) for r in rows]
        ratio = max(max(r[kind] / r[f"aic_{kind}"], r[f"aic_{kind}"] / r[kind]) for r in rows)
        cells += [f"{statistics.median(errors):.1%}", f"{sorted(errors)[int(0.9 * (len(errors) - 1))]:.1%}",
                  f"{ratio:.2f}x"]
    return "| " + " | ".join(cells) + " |"


def report(rows: list[dict], references: list[dict], table) -> str:
    lines = [
        "# Performance model error against NVIDIA AIConfigurator (held-out points)", "",
        f"Written by `bench/perf_model_error.py`. Constants: `modelfleet/data/llm_performance.yaml` ({table.source}, "
        f"fitted {table.fitted} on {', '.join(n for n, _ in TRAINING_MODELS)}). Points: other models only (DeepSeek-V3 "
        "shares DeepSeek-R1's architecture: its points are other layouts and request shapes), seeded sample "
        f"(seed {SEED}) of TP {GRID['tp']}, batch {GRID['batch']}, input {GRID['input']}, output {GRID['output']} "
        "where weights and KV fit; MoE points use expert parallelism 30% of the time.", "",
        "prefill = our idle prefill vs AIConfigurator's TTFT at batch 1; TPOT = ours vs its aggregated TPOT at the "
        "batch. Error = ours / AIConfigurator - 1; the ratio column is the worst max(ours/its, its/ours).", "",
        "| points | n | prefill median abs | p90 | worst ratio | TPOT median abs | p90 | worst ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|", summary(rows, "all")]
    lines += [summary([r for r in rows if r["moe"] == moe], "MoE" if moe else "dense") for moe in (False, True)]
    for system in sorted({r["point"].system for r in rows}):
        lines.append(summary([r for r in rows if r["point"].system == system], system))
    lines += ["", "## REFERENCE.md figures", "", _header()] + [_row(r) for r in references]
    lines += ["", "## Every held-out point", "", _header()] + [_row(r) for r in rows]
    return "\n".join(lines) + "\n"


def _header() -> str:
    return ("| model | GPU | tp | ep | batch | in | out | AIC prefill ms | ours | err | AIC TPOT ms | ours | err |\n"
            "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")


def _row(r: dict) -> str:
    p = r["point"]
    return (f"| {p.model.split('--')[-1]} | {p.system} | {p.tp} | {'ep' if p.expert_parallel else ''} | {p.batch} | "
            f"{p.input_tokens} | {p.output_tokens} | {r['aic_prefill']:.1f} | {r['prefill']:.1f} | "
            f"{error(r, 'prefill'):+.0%} | {r['aic_tpot']:.2f} | {r['tpot']:.2f} | {error(r, 'tpot'):+.0%} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--performance", default=None, help="constants file (default: the shipped one)")
    parser.add_argument("--cache", default="bench/results/aic_heldout.json")
    parser.add_argument("--out", default="bench/perf_model_error.md")
    parser.add_argument("--points", type=int, default=PER_MODEL, help="points per held-out model and GPU (CI: a few)")
    args = parser.parse_args()
    assert not {name for name, _ in HELD_OUT} & {name for name, _ in TRAINING_MODELS}, "held out means not trained on"
    Path(args.cache).parent.mkdir(parents=True, exist_ok=True)
    cache = EstimateCache(args.cache)
    points = [p for system in aic.SYSTEMS.values()
              for p in sample(system, aic.system_spec(system)["gpu"]["mem_capacity"] / 2**30, args.points)]
    references = [aic.Point(m, s, tp, b, i, o) for m, s, tp, b, i, o in REFERENCE]
    measured = {p: measure(cache, p) for p in points + references}
    cache.save()
    if args.performance:
        import yaml
        table = performance_table_from_data(yaml.safe_load(Path(args.performance).read_text()))
    else:
        table = load_performance_table()
    failed = {p: why for p, why in measured.items() if isinstance(why, str)}
    rows = [compare(table, p, measured[p]) for p in points if p not in failed]
    refs = [compare(table, p, measured[p]) for p in references if p not in failed]
    text = report(rows, refs, table) + "".join(f"\nAIConfigurator could not estimate {p}: {why}\n"
                                               for p, why in failed.items())
    Path(args.out).write_text(text)
    print("\n".join(text.splitlines()[:18]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
