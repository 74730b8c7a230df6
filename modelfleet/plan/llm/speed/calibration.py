"""The performance model's per-GPU constants, shipped as data (``data/llm_performance.yaml``).

Calibrated GPUs carry constants fitted to NVIDIA AIConfigurator's measured vLLM databases (``modelfleet
calibrate`` writes the file). A GPU without measured data is timed by the same model at its own data-sheet
peaks (from the instance table) with the efficiencies of a calibrated GPU of its kind (``datasheet:``), and
its estimates say so. Loading is the only I/O here (``load_performance_table``); the rest is pure.
"""

from __future__ import annotations

import dataclasses
import functools
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


def performance_to_data(gpus: Mapping[str, GpuPerformance], version: str, fitted: str) -> dict[str, Any]:
    """The YAML document for ``gpus`` (what ``modelfleet calibrate`` writes)."""
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
    return out


def performance_table_from_data(data: Mapping[str, Any]) -> PerformanceTable:
    gpus = {}
    for key, entry in data["gpus"].items():
        rooflines = {name: None if entry.get(name) is None else Roofline(**entry[name]) for name in _ROOFLINES}
        curves = tuple((int(tp), tuple((int(s), float(t)) for s, t in curve))
                       for tp, curve in sorted(entry["allreduce_us"].items(), key=lambda item: int(item[0])))
        gpus[key] = GpuPerformance(key=key, **{n: float(entry.get(n, _OPTIONAL.get(n))) for n in _NUMBERS}, **rooflines,
                                   allreduce_us=curves, source=f"{entry['source']}, fitted {data['fitted']}")
    return PerformanceTable(gpus, dict(data.get("datasheet", {})), str(data["fitted"]), str(data["source"]))


@functools.lru_cache(maxsize=1)
def load_performance_table() -> PerformanceTable:
    text = resources.files("modelfleet").joinpath("data/llm_performance.yaml").read_text(encoding="utf-8")
    return performance_table_from_data(yaml.safe_load(text))


def gpu_performance(table: PerformanceTable, key: str, name: str, tflops: float, memory_gbs: float,
                    fp8: bool) -> GpuPerformance:
    """The constants for GPU ``key``: calibrated, or its data-sheet peaks with a calibrated kin's efficiencies
    (whose all-reduce curve it also takes: the same kind of link)."""
    if key in table.gpus and table.gpus[key].memory_gbs == memory_gbs:
        return table.gpus[key]
    kin = table.gpus[table.borrow.get(key, key) if table.borrow.get(key, key) in table.gpus else "l40s"]
    if kin.key == "a100-80" or key == kin.key:  # same silicon, another memory: still measured data
        source = f"{kin.source}, at {name}'s {memory_gbs:,.0f} GB/s"
    else:
        source = (f"datasheet roofline: {name} at {tflops:g} TFLOPS and {memory_gbs:,.0f} GB/s, with the "
                  f"efficiencies and all-reduce of the {kin.key} fit (no measured data for this GPU)")
    return dataclasses.replace(kin, key=key, tflops=tflops, fp8_tflops=2 * tflops if fp8 else 0.0,
                               memory_gbs=memory_gbs, gemm_fp8=kin.gemm_fp8 if fp8 else None, source=source)


@functools.lru_cache(maxsize=64)
def gpu_for(gpu: GpuType) -> GpuPerformance:
    """The speed constants of a catalogue GPU (measured, or its data sheet's peaks; see gpu_performance).
    FP8 tensor cores from compute capability 8.9 (Ada, Hopper)."""
    table = load_performance_table()
    fp8 = (gpu.compute_capability or 0.0) >= 8.9
    bandwidth = gpu.memory_bandwidth_gbs or table.gpus.get(gpu.key, table.gpus["l40s"]).memory_gbs
    return gpu_performance(table, gpu.key, gpu.name, gpu.fp16_tflops, bandwidth, fp8)
