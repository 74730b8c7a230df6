"""The performance model's per-GPU constants, shipped as data (``data/llm_performance.yaml``).

Calibrated GPUs carry constants fitted to NVIDIA AIConfigurator's measured vLLM databases (``modelfleet
calibrate`` writes the file). A GPU without measured data is timed by the same model at its own data-sheet
peaks (from the instance table) with the efficiencies of a calibrated GPU of its own form factor (``sxm`` or
``pcie``: NVLink board parts and cards differ in clocks, power and interconnect): the one ``datasheet:``
names, else the one nearest in peak compute. Its estimates say so; a GPU whose form factor has no calibrated
GPU at all borrows across and says that loudly, never silently. Loading is the only I/O here (``load_performance_table``); the rest is pure.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from importlib import resources
from typing import Any, Mapping

import yaml

from ...hardware.instances import GpuType
from .performance import GpuPerformance, Roofline

# Starting points of the end-to-end fit (modelfleet calibrate), typical of vLLM on Hopper.
DATASHEET_DEFAULTS: dict[str, Any] = {
    "context_attention": Roofline(0.45, 0.5, 13.0),
    "decode_attention": Roofline(0.5, 0.75, 15.0),
    "moe": Roofline(0.5, 0.7, 30.0),
    "prefill_dispatch_ms_per_layer": 0.8,
    "step_overhead_us": 100.0,
    "mla_layer_floor_us": 50.0,
    "moe_expert_us": 2.0,
    "moe_ep_efficiency": 1.0,
}
_ROOFLINES = ("gemm", "gemm_fp8", "context_attention", "decode_attention", "moe", "elementwise")
_NUMBERS = ("tflops", "fp8_tflops", "memory_gbs", "p2p_gbs", "p2p_latency_us", "prefill_dispatch_ms_per_layer",
            "step_overhead_us", "mla_layer_floor_us", "moe_expert_us", "moe_ep_efficiency")
_OPTIONAL = {"moe_ep_efficiency": 1.0}  # constants newer than some tables: their neutral value


@dataclass(frozen=True)
class PerformanceTable:
    gpus: Mapping[str, GpuPerformance]  # calibrated, by GPU key (data/instances.yaml)
    borrow: Mapping[str, str]  # GPU key without measured data -> the calibrated GPU whose efficiencies it uses
    fitted: str  # date of the fit
    source: str
    # Each calibrated GPU's form factor (the instance table's, as calibrate wrote it): whose efficiencies an
    # uncalibrated GPU may borrow.
    form_factors: Mapping[str, str] = dataclasses.field(default_factory=dict)


def performance_to_data(gpus: Mapping[str, GpuPerformance], version: str, fitted: str,
                        form_factors: Mapping[str, str]) -> dict[str, Any]:
    """The YAML document for ``gpus`` (what ``modelfleet calibrate`` writes); ``form_factors``: the instance
    table's, for each calibrated GPU."""
    out: dict[str, Any] = {"source": f"NVIDIA AIConfigurator {version} (PyPI aiconfigurator), vLLM-backend databases",
                           "aiconfigurator_version": version, "fitted": fitted, "gpus": {}}
    for key, gpu in sorted(gpus.items()):
        entry: dict[str, Any] = {"source": gpu.source}
        entry.update({name: getattr(gpu, name) for name in _NUMBERS})
        for name in _ROOFLINES:
            value = getattr(gpu, name)
            entry[name] = None if value is None else dataclasses.asdict(value)
        entry["allreduce_us"] = {tp: [list(pair) for pair in curve] for tp, curve in gpu.allreduce_us}
        out["gpus"][key] = entry
    out["datasheet"] = {"a100": "a100-80", "a10g": "l40s", "l4": "l40s", "t4": "l40s"}
    out["form_factors"] = {key: form_factors[key] for key in sorted(gpus)}
    return out


def performance_table_from_data(data: Mapping[str, Any]) -> PerformanceTable:
    gpus = {}
    for key, entry in data["gpus"].items():
        rooflines = {name: None if entry.get(name) is None else Roofline(**entry[name]) for name in _ROOFLINES}
        curves = tuple((int(tp), tuple((int(s), float(t)) for s, t in curve))
                       for tp, curve in sorted(entry["allreduce_us"].items(), key=lambda item: int(item[0])))
        gpus[key] = GpuPerformance(key=key, **{n: float(entry.get(n, _OPTIONAL.get(n))) for n in _NUMBERS}, **rooflines,
                                   allreduce_us=curves, source=f"{entry['source']}, fitted {data['fitted']}")
    return PerformanceTable(gpus, dict(data.get("datasheet", {})), str(data["fitted"]), str(data["source"]),
                            dict(data.get("form_factors", {})))


@functools.lru_cache(maxsize=1)
def load_performance_table() -> PerformanceTable:
    text = resources.files("modelfleet").joinpath("data/llm_performance.yaml").read_text(encoding="utf-8")
    return performance_table_from_data(yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)))  # noqa: S506


def gpu_performance(table: PerformanceTable, gpu: GpuType, fp8: bool, memory_gbs: float) -> GpuPerformance:
    """The constants for ``gpu``: calibrated, or its data-sheet peaks with a calibrated kin's efficiencies
    (whose all-reduce curve it also takes: the same kind of link)."""
    key, name, tflops = gpu.key, gpu.name, gpu.fp16_tflops
    if key in table.gpus and table.gpus[key].memory_gbs == memory_gbs:
        return table.gpus[key]
    kin, why = calibrated_kin(table, gpu)
    if kin.key == "a100-80" and key == "a100" or key == kin.key:  # same silicon, another memory: still measured
        source = f"{kin.source}, at {name}'s {memory_gbs:,.0f} GB/s"
    else:
        source = (f"datasheet roofline: {name} at {tflops:g} TFLOPS and {memory_gbs:,.0f} GB/s, with the "
                  f"efficiencies and all-reduce of the {kin.key} fit ({why}; no measured data for this GPU)")
    return dataclasses.replace(kin, key=key, tflops=tflops, fp8_tflops=2 * tflops if fp8 else 0.0,
                               memory_gbs=memory_gbs, gemm_fp8=kin.gemm_fp8 if fp8 else None, source=source)


def calibrated_kin(table: PerformanceTable, gpu: GpuType) -> tuple[GpuPerformance, str]:
    """The calibrated GPU whose measured efficiencies ``gpu`` borrows, and why that one: the table's declared
    kin when it shares ``gpu``'s form factor, else the calibrated GPU of that form factor nearest in peak
    compute (log scale; then in bandwidth). With none of its form factor, the nearest of any, said as such."""
    declared = table.borrow.get(gpu.key)
    if declared in table.gpus and table.form_factors.get(declared) == gpu.form_factor:
        return table.gpus[declared], f"the {gpu.form_factor} kin the table names"
    same = [g for k, g in sorted(table.gpus.items()) if table.form_factors.get(k) == gpu.form_factor]
    bandwidth = gpu.memory_bandwidth_gbs or 1.0

    def distance(kin: GpuPerformance) -> tuple[float, float]:
        return (abs(math.log(kin.tflops / gpu.fp16_tflops)), abs(math.log(kin.memory_gbs / bandwidth)))
    if same:
        return min(same, key=distance), f"the calibrated {gpu.form_factor} GPU nearest in peak compute"
    kin = min(sorted(table.gpus.values(), key=lambda g: g.key), key=distance)
    return kin, (f"NO calibrated {gpu.form_factor} GPU: borrowed across form factors from the "
                 f"{table.form_factors.get(kin.key, 'unknown')} {kin.key}, a rougher estimate")


@functools.lru_cache(maxsize=64)
def gpu_for(gpu: GpuType) -> GpuPerformance:
    """The speed constants of a catalogue GPU (measured, or its data sheet's peaks; see gpu_performance).
    FP8 tensor cores from compute capability 8.9 (Ada, Hopper)."""
    table = load_performance_table()
    fp8 = (gpu.compute_capability or 0.0) >= 8.9
    bandwidth = gpu.memory_bandwidth_gbs or (table.gpus[gpu.key].memory_gbs if gpu.key in table.gpus
                                             else calibrated_kin(table, gpu)[0].memory_gbs)
    return gpu_performance(table, gpu, fp8, bandwidth)
