"""``modelfleet calibrate``: fit the LLM performance model's per-GPU constants to NVIDIA AIConfigurator.

Needs the ``[calibrate]`` extra (``pip install 'modelfleet[calibrate]'``: AIConfigurator with its measured
vLLM databases, about 850 MB). Per GPU that AIConfigurator measured:

1. the GEMM roofline (BF16, and FP8 where measured) is fitted to its per-op GEMM table;
2. the all-reduce curve is its measured vLLM custom all-reduce table, kept as data;
3. element-wise and pipeline-hop constants are its system file's;
4. attention, MoE, dispatch and step constants are fitted to its end-to-end estimates on the TRAINING
   points below (three models, a seeded sample of layouts and request shapes). ``bench/perf_model_error.py``
   measures the result on other models and shapes.

The result is written as a dated YAML file; the compiler ships one as ``modelfleet/data/llm_performance.yaml``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
from datetime import date
from typing import Any

import yaml

from ..errors import Issue, SpecError
from ..render.outputs import write_file
from ..plan.llm.speed.performance import GpuPerformance, Layout, LlmShape, Roofline, shape_from_fields
from ..plan.hardware.instances import load_instance_catalogue
from ..plan.llm.speed.calibration import DATASHEET_DEFAULTS, performance_to_data
from ..spec.hf_config import shape_fields

NAME = "calibrate"
HELP = "fit the LLM speed model's per-GPU constants to NVIDIA AIConfigurator (needs the [calibrate] extra)"

# Fitted on these; bench/perf_model_error.py evaluates on other models.
# (AIConfigurator's config name, weight bytes): dense GQA, MoEs of many small and of few big experts, and MLA with FP8 weights
# (DeepSeek-R1's own checkpoint; it fits only one H200 node). bench/perf_model_error.py evaluates on others.
TRAINING_MODELS = (("meta-llama--Meta-Llama-3.1-8B", 2), ("Qwen--Qwen3-32B", 2), ("Qwen--Qwen3-30B-A3B", 2),
                   ("mistralai--Mixtral-8x7B-v0.1", 2), ("deepseek-ai--DeepSeek-R1", 1))
TRAINING_GRID = {"tp": (1, 2, 4, 8), "batch": (1, 8, 32, 128), "input": (256, 1024, 4096, 16384),
                 "output": (128, 512, 1536)}
POINTS_PER_MODEL = 20
SEED = 13


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", default="llm_performance.yaml", help="file to write (default: ./llm_performance.yaml;"
                        " the shipped table is modelfleet/data/llm_performance.yaml)")
    parser.add_argument("--gpus", default=",".join(_systems()), help="GPU keys to calibrate (default: all measured)")
    parser.add_argument("--cache", default=None, help="JSON file keeping AIConfigurator's end-to-end answers "
                        "between runs (they take about a second each)")


def _systems() -> dict[str, str]:
    from ..engines.aiconfigurator import SYSTEMS

    return SYSTEMS


def run(args: argparse.Namespace) -> int:
    from ..engines import aiconfigurator as aic
    from ..engines.performance_fit import log_errors  # numpy: only where calibrating

    try:
        version = aic.version()
    except aic.AiconfiguratorMissing as exc:
        raise SpecError([Issue("", 0, 0, "calibrate", str(exc), "pip install 'modelfleet[calibrate]'")]) from None
    cache = EstimateCache(args.cache)
    gpus, with_mla = {}, []
    for key in args.gpus.split(","):
        gpus[key], points = calibrate_gpu(key, cache)
        prefill, tpot = log_errors(gpus[key], points)
        print(f"{key}: {len(points)} training points, median |error| prefill {_median_abs(prefill):.1%}, "
              f"TPOT {_median_abs(tpot):.1%}")
        if any(p.shape.is_mla for p in points):
            with_mla.append(key)
    cache.save()
    for key in gpus:  # an MLA model fits only the biggest nodes: the others take the MLA constant of one that has it
        if key not in with_mla and with_mla:
            gpus[key] = dataclasses.replace(gpus[key], mla_layer_floor_us=gpus[with_mla[0]].mla_layer_floor_us)
    registry = load_instance_catalogue().gpus  # each calibrated GPU's form factor, as the instance table says
    data = performance_to_data(gpus, version, date.today().isoformat(), {k: registry[k].form_factor for k in gpus})
    write_file(args.out, (HEADER + yaml.safe_dump(data, sort_keys=False, width=120)).encode())
    print(f"wrote {args.out}")
    return 0


HEADER = """\
# Per-GPU constants of the LLM performance model (modelfleet/plan/llm/speed/performance.py), written by
# `modelfleet calibrate` from NVIDIA AIConfigurator's measured vLLM databases. Do not edit by hand: re-run it.
# gemm / gemm_fp8: fitted to the per-op GEMM table; allreduce_us: the measured custom all-reduce curve
# (elements -> us); elementwise, p2p: the system file's constants; the rest fitted to end-to-end estimates
# of the training models. GPUs without measured data use the same model with data-sheet peaks (`datasheet`).
"""


class EstimateCache:
    def __init__(self, path: str | None):
        self.path = path
        self.data: dict[str, list[float]] = {}
        if path and os.path.exists(path):
            with open(path, encoding="utf-8") as handle:
                self.data = json.load(handle)

    def estimate(self, config: dict[str, Any], point: Any) -> tuple[float, float]:
        from ..engines import aiconfigurator as aic

        key = json.dumps([point.model, point.system, point.tp, point.batch, point.input_tokens,
                          point.output_tokens, point.expert_parallel])
        if key not in self.data:
            self.data[key] = list(aic.estimate(config, point))
            if len(self.data) % 20 == 0:
                self.save()
        return self.data[key][0], self.data[key][1]

    def save(self) -> None:
        if self.path:
            with open(self.path, "w", encoding="utf-8") as handle:
                json.dump(self.data, handle, indent=0, sort_keys=True)


def model_shape(name: str, weight_bytes: float = 2) -> tuple[dict[str, Any], LlmShape]:
    """A shipped config.json: its own FP8 checkpoint at 1 byte per weight, else unquantized (AIConfigurator then
    times BF16, as our shape says)."""
    from ..engines import aiconfigurator as aic

    config = aic.model_config(name)
    if weight_bytes >= 2:
        config = {k: v for k, v in config.items() if k != "quantization_config"}
    return config, shape_from_fields(shape_fields(config), weight_bytes=weight_bytes)


def fits(shape: LlmShape, memory_gib: float, tp: int, batch: int, tokens: int) -> bool:
    """Weights and the batch's KV cache within 85% of the GPUs' memory (as vLLM would run it)."""
    weights = shape.params() * shape.weight_bytes / tp
    kv = batch * tokens * shape.kv_bytes_per_token() / (1 if shape.is_mla else tp)
    return weights + kv <= 0.85 * memory_gib * 2**30


def sample_points(models: tuple[tuple[str, float], ...], grid: dict[str, tuple[int, ...]], per_model: int,
                  seed: int, system: str, memory_gib: float) -> list[Any]:
    """A seeded sample of the grid's layouts and request shapes that fit in memory; MoE points use expert
    parallelism 30% of the time."""
    from ..engines.aiconfigurator import Point

    rng = random.Random(f"{seed}-{system}")
    chosen = []
    for name, weight_bytes in models:
        _, shape = model_shape(name, weight_bytes)
        combos = [(tp, b, i, o) for tp in grid["tp"] for b in grid["batch"] for i in grid["input"]
                  for o in grid["output"] if shape.heads % tp == 0 and fits(shape, memory_gib, tp, b, i + o)]
        for tp, b, i, o in rng.sample(combos, min(per_model, len(combos))):
            chosen.append(Point(name, system, tp, b, i, o, expert_parallel=shape.is_moe and rng.random() < 0.3))
    return chosen


def measured_points(cache: EstimateCache, chosen: list[Any]) -> list[Any]:
    """AIConfigurator's TPOT at each point and its TTFT for one request (our prefill) of the same prompt."""
    from ..engines.performance_fit import Measured

    points = []
    weights = dict(TRAINING_MODELS)
    for point in chosen:
        config, shape = model_shape(point.model, weights[point.model])
        try:
            _, tpot = cache.estimate(config, point)
            prefill, _ = cache.estimate(config, dataclasses.replace(point, batch=1))
        except Exception as exc:  # no measured data for this shape (e.g. some MoE layouts on A100): skipped
            print(f"note: skipped {point}: AIConfigurator: {str(exc).splitlines()[0][:160]}")
            continue
        points.append(Measured(shape, Layout(tp=point.tp, expert_parallel=point.expert_parallel), point.batch, point.input_tokens, point.output_tokens,
                               prefill, tpot))
    return points


def per_op_constants(key: str) -> GpuPerformance:
    """What the per-op tables and the system file give, before the end-to-end fit."""
    from ..engines import aiconfigurator as aic
    from ..engines.performance_fit import fit_gemm

    system = aic.SYSTEMS[key]
    spec = aic.system_spec(system)
    tflops, gbs = spec["gpu"]["bfloat16_tc_flops"] / 1e12, spec["gpu"]["mem_bw"] / 1e9
    fp8 = float(spec["gpu"].get("fp8_tc_flops", 0)) / 1e12 if spec["gpu"].get("sm_version", 0) >= 89 else 0.0
    rows = [(r.m, r.n, r.k, r.latency_us) for r in aic.gemm_rows(system)]
    fp8_rows = [(r.m, r.n, r.k, r.latency_us) for r in aic.gemm_rows(system, "fp8")] if fp8 else []
    defaults = DATASHEET_DEFAULTS
    elementwise = Roofline(1.0, spec["gpu"]["mem_bw_empirical_scaling_factor"],
                           spec["gpu"]["mem_empirical_constant_latency"] * 1e6)
    return GpuPerformance(
        key=key, tflops=tflops, fp8_tflops=fp8, memory_gbs=gbs, gemm=fit_gemm(rows, tflops, gbs),
        gemm_fp8=fit_gemm(fp8_rows, fp8, gbs, weight_bytes=1.0) if fp8_rows else None,
        context_attention=defaults["context_attention"], decode_attention=defaults["decode_attention"],
        moe=defaults["moe"], elementwise=elementwise, allreduce_us=tuple(aic.allreduce_curve(system).items()),
        p2p_gbs=spec["node"]["inter_node_bw"] / 1e9, p2p_latency_us=spec["node"]["p2p_latency"] * 1e6,
        prefill_dispatch_ms_per_layer=defaults["prefill_dispatch_ms_per_layer"],
        step_overhead_us=defaults["step_overhead_us"], mla_layer_floor_us=defaults["mla_layer_floor_us"],
        moe_expert_us=defaults["moe_expert_us"],
        source=f"AIConfigurator {aic.version()} {system} vLLM {aic.database_version(system)} database")


def calibrate_gpu(key: str, cache: EstimateCache) -> tuple[GpuPerformance, list[Any]]:
    """The fitted constants of one GPU, and the training points they were fitted on."""
    from ..engines import aiconfigurator as aic
    from ..engines.performance_fit import fit_end_to_end

    base = per_op_constants(key)
    memory = aic.system_spec(aic.SYSTEMS[key])["gpu"]["mem_capacity"] / 2**30
    chosen = sample_points(TRAINING_MODELS, TRAINING_GRID, POINTS_PER_MODEL, SEED, aic.SYSTEMS[key], memory)
    points = measured_points(cache, chosen)
    return fit_end_to_end(base, points), points


def _median_abs(log_errors: list[float]) -> float:
    return statistics.median(abs(math.exp(e) - 1.0) for e in log_errors)
