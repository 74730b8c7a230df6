"""The adapter to NVIDIA AIConfigurator (PyPI ``aiconfigurator``, the ``[calibrate]`` extra): its measured
per-op tables and its end-to-end estimates, as plain Python values.

AIConfigurator ships per-op latency databases measured on real GPUs with real vLLM kernels (GEMMs,
attention, MoE, all-reduce) and composes them into TTFT/TPOT estimates of vLLM's aggregated serving.
Only ``modelfleet calibrate`` and ``bench/perf_model_error.py`` import this module; the compiler reads the
fitted constants from ``modelfleet/data/llm_performance.yaml`` and never imports AIConfigurator.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from dataclasses import dataclass
from importlib import metadata, resources
from typing import Any, Mapping

import yaml

# Our GPU keys (data/instances.yaml) -> AIConfigurator system names with vLLM-backend data. A100 40 GB has
# no system of its own: it uses the A100 SXM tables with its own bandwidth (the fitted efficiencies are
# fractions of each GPU's peak).
SYSTEMS: dict[str, str] = {"h100": "h100_sxm", "h200": "h200_sxm", "a100-80": "a100_sxm", "l40s": "l40s"}
BACKEND = "vllm"


class AiconfiguratorMissing(RuntimeError):
    pass


def version() -> str:
    try:
        return metadata.version("aiconfigurator")
    except metadata.PackageNotFoundError:
        raise AiconfiguratorMissing("aiconfigurator is not installed") from None


def _systems_dir() -> str:
    return str(resources.files("aiconfigurator_core").joinpath("systems"))


def system_spec(system: str) -> dict[str, Any]:
    """The system's hardware file: peak FLOPS and bandwidth, the empirical memory-op constants, links."""
    with open(os.path.join(_systems_dir(), f"{system}.yaml"), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def database_version(system: str) -> str:
    from aiconfigurator_core.sdk.perf_database import get_latest_database_version

    return str(get_latest_database_version(system=system, backend=BACKEND))


def _table(system: str, op_dir: str, filename: str) -> Any:
    """The newest table at or below the database version AIConfigurator itself would use."""
    import pandas

    base = os.path.join(_systems_dir(), system_spec(system)["data_dir"], op_dir, BACKEND)
    wanted = _version_key(database_version(system))
    found = sorted((v for v in os.listdir(base) if os.path.exists(os.path.join(base, v, filename))
                    and _version_key(v) <= wanted), key=_version_key)
    if not found:
        raise AiconfiguratorMissing(f"no {filename} for {system} at or below vLLM {'.'.join(map(str, wanted))}")
    return pandas.read_parquet(os.path.join(base, found[-1], filename))


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".")[:3] if part.isdigit())


@dataclass(frozen=True)
class GemmRow:
    m: int
    n: int
    k: int
    latency_us: float


def gemm_rows(system: str, dtype: str = "bfloat16") -> list[GemmRow]:
    """Measured dense GEMMs (the kernel vLLM uses for unquantized linear layers)."""
    df = _table(system, "gemm", "gemm_perf.parquet")
    df = df[(df.gemm_dtype == dtype) & (df.n >= 128) & (df.k >= 128)]
    return [GemmRow(int(m), int(n), int(k), float(t) * 1000.0) for m, n, k, t in
            zip(df.m, df.n, df.k, df.latency)]


def allreduce_curve(system: str) -> dict[int, tuple[tuple[int, float], ...]]:
    """vLLM's custom all-reduce under CUDA graphs: message elements (bf16) -> microseconds, per GPU count."""
    df = _table(system, "comm", "custom_allreduce_perf.parquet")
    df = df[df.kernel_source.str.contains("graph")]
    curves = {}
    for gpus in sorted(set(int(n) for n in df.num_gpus)):
        rows = df[df.num_gpus == gpus].sort_values("message_size")
        curves[gpus] = tuple((int(size), round(float(t) * 1000.0, 3)) for size, t in zip(rows.message_size, rows.latency))
    return curves


@dataclass(frozen=True)
class Point:
    """One end-to-end configuration: a model (its config.json), a system and a vLLM layout."""

    model: str  # a key of the caller's config table
    system: str
    tp: int
    batch: int
    input_tokens: int
    output_tokens: int
    expert_parallel: bool = False


def estimate(config: Mapping[str, Any], point: Point) -> tuple[float, float]:
    """AIConfigurator's aggregated-serving (vLLM) estimate: (TTFT ms, TPOT ms)."""
    from aiconfigurator.cli.api import cli_estimate

    logging.disable(logging.WARNING)  # it logs every fallback table it loads
    moe = bool(config.get("num_experts") or config.get("n_routed_experts") or config.get("num_local_experts"))
    kwargs: dict[str, Any] = {}
    if moe:
        kwargs = {"moe_ep_size": point.tp, "moe_tp_size": 1} if point.expert_parallel else {
            "moe_tp_size": point.tp, "moe_ep_size": 1}
    with tempfile.TemporaryDirectory() as folder:
        with open(os.path.join(folder, "config.json"), "w", encoding="utf-8") as handle:
            json.dump(dict(config), handle)
        result = cli_estimate(folder, point.system, mode="agg", backend_name=BACKEND, isl=point.input_tokens,
                              osl=point.output_tokens, batch_size=point.batch, tp_size=point.tp, **kwargs)
    return float(result.ttft), float(result.tpot)


def model_config(name: str) -> dict[str, Any]:
    """One of the config.json files AIConfigurator ships (``meta-llama--Meta-Llama-3.1-8B``)."""
    path = resources.files("aiconfigurator_core").joinpath("model_configs", f"{name}_config.json")
    return json.loads(path.read_text(encoding="utf-8"))
