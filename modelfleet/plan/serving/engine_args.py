"""Command lines of the two engines, as the plan records them and the Deployments run them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    from ...spec.environment import EnvironmentSpec

TRITON_HTTP_PORT, TRITON_GRPC_PORT, TRITON_METRICS_PORT = 8000, 8001, 8002
VLLM_PORT = 8000
MODEL_REPOSITORY_DIR = "/models"  # filled from the server's S3 prefix before Triton starts
# runai_streamer's distributed mode (vLLM's RunaiModelStreamerLoader accepts distributed, concurrency and
# memory_limit): the replica's ranks split the checkpoint's reads and broadcast them (plan/llm/weights.py).
RUNAI_DISTRIBUTED = {"distributed": True}


# Per-model latency quantiles over a sliding minute (prometheus-cpp's default window): the p99 the alerts hold
# to sla.p99_latency_ms. Triton 2.51 (here) and 2.73 (deployed) export latency histograms only for decoupled
# models' first response (nv_inference_first_response_histogram_ms); everything else has counters (means)
# and these summaries. Pinned rather than Triton's default set, which could change.
SUMMARY_QUANTILES = "0.5:0.05,0.9:0.01,0.99:0.001"


def triton_metrics_args(decoupled: bool) -> tuple[str, ...]:
    """Latency summaries for every model (per-stage quantiles: the alerts' and the canary analysis's p99,
    render/analysis.py); the first-response histogram where a server has a decoupled model. The only place
    these flags are set: ``triton_server_args`` takes them with ``observability``."""
    args = ["--metrics-config=summary_latencies=true", f"--metrics-config=summary_quantiles={SUMMARY_QUANTILES}"]
    if decoupled:
        args.append("--metrics-config=histogram_latencies=true")
    return tuple(args)


def triton_tracing_args(collector_url: str, one_in: int, service: str, environment: str) -> tuple[str, ...]:
    """OpenTelemetry tracing: one request in ``one_in`` traced at level TIMESTAMPS (Triton's spans of the
    request, its queue and compute), with no cap on the count, exported over OTLP/HTTP; the spans name the
    server (service.name) and the stack (deployment.environment). Accepted by 2.51 and by 2.73 (docs/engines.md)."""
    return ("--trace-config=mode=opentelemetry", f"--trace-config=rate={one_in}", "--trace-config=level=TIMESTAMPS",
            "--trace-config=count=-1", f"--trace-config=opentelemetry,url={collector_url}",
            f"--trace-config=opentelemetry,resource=service.name={service}",
            f"--trace-config=opentelemetry,resource=deployment.environment={environment}")


def server_observability(env: EnvironmentSpec, server: str, decoupled: bool) -> tuple[str, ...]:
    """One Triton server's metrics flags, and its tracing flags where the stack turns tracing on."""
    tracing = env.triton.tracing
    traced = () if tracing is None else triton_tracing_args(tracing.collector_url, tracing.one_in, server, env.name)
    return triton_metrics_args(decoupled) + traced


def triton_server_args(exit_timeout_secs: int, cache_size_bytes: int, python_shm_bytes: int,
                       observability: tuple[str, ...]) -> tuple[str, ...]:
    """``tritonserver`` flags: strict readiness (no traffic before every model loads), bounded shutdown,
    one response cache in host RAM sized by the plan, a shared-memory arena for python models, and
    ``observability``'s metrics and tracing flags (:func:`triton_metrics_args`, :func:`triton_tracing_args`)."""
    args = [
        "tritonserver",
        f"--model-repository={MODEL_REPOSITORY_DIR}",
        "--model-control-mode=none",
        "--strict-readiness=true",
        f"--exit-timeout-secs={exit_timeout_secs}",
        f"--http-port={TRITON_HTTP_PORT}",
        f"--grpc-port={TRITON_GRPC_PORT}",
        f"--metrics-port={TRITON_METRICS_PORT}",
        "--allow-metrics=true",
    ]
    if cache_size_bytes > 0:
        args.append(f"--cache-config=local,size={cache_size_bytes}")
    if python_shm_bytes > 0:
        args.append(f"--backend-config=python,shm-default-byte-size={python_shm_bytes}")
    return tuple(args) + observability


def vllm_serve_args(*, artifact: str, served_name: str, tp: int, pp: int, max_model_len: int, max_num_seqs: int,
                    gpu_memory_utilization: float, dtype: str, quantization: str | None, kv_cache_dtype: str,
                    prefix_caching: bool, max_num_batched_tokens: int | None = None, expert_parallel: bool = False,
                    lora: LoraArgs | None = None, extra: tuple[str, ...] = (), revision: str | None = None,
                    distributed_load: bool = False) -> tuple[str, ...]:
    """The complete ``vllm serve`` argument list (every default that changed between versions pinned), then the
    model's own ``extra_args`` (which may not repeat these flags: spec/llm_options.py).

    ``dtype``, ``quantization`` and ``kv_cache_dtype`` are vLLM's own values (llm/precision.py decides them).
    ``revision``: a Hub commit the weights and the tokenizer are both read at (spec/versions.py).
    ``distributed_load``: an S3 artifact streamed by all of the replica's ranks together (plan/llm/weights.py)."""
    args = [
        "vllm", "serve", artifact,
        "--served-model-name", served_name,
        "--host", "0.0.0.0",
        "--port", str(VLLM_PORT),
        "--tensor-parallel-size", str(tp),
        "--pipeline-parallel-size", str(pp),
        "--max-model-len", str(max_model_len),
        "--max-num-seqs", str(max_num_seqs),
        *(("--max-num-batched-tokens", str(max_num_batched_tokens)) if max_num_batched_tokens else ()),
        "--gpu-memory-utilization", f"{gpu_memory_utilization:.2f}",
        "--dtype", dtype,
        *(("--quantization", quantization) if quantization else ()),
        "--kv-cache-dtype", kv_cache_dtype,
        "--enable-prefix-caching" if prefix_caching else "--no-enable-prefix-caching",
        *(("--revision", revision, "--tokenizer-revision", revision) if revision else ()),
    ]
    if expert_parallel:
        args.append("--enable-expert-parallel")
    if lora is not None:
        args += ["--enable-lora", "--max-lora-rank", str(lora.max_rank), "--max-loras", str(lora.max_loras),
                 "--lora-modules", *(f"{name}={artifact}" for name, artifact in lora.adapters)]
    if pp > 1:
        args += ["--distributed-executor-backend", "ray"]  # pipeline stages live on other nodes
    if artifact.startswith("s3://"):
        args += ["--load-format", "runai_streamer"]  # streams safetensors straight from S3
        if distributed_load:  # each rank reads its share and the replica's ranks broadcast them
            args += ["--model-loader-extra-config", json.dumps(RUNAI_DISTRIBUTED, separators=(",", ":"))]
    return tuple(args) + tuple(extra)


@dataclass(frozen=True)
class LoraArgs:
    adapters: tuple[tuple[str, str], ...]  # (name, Hugging Face id, or the local folder of a pinned adapter)
    max_rank: int
    max_loras: int


# The pod's Hugging Face cache (HF_HOME), and where the download step puts pinned LoRA adapters: vLLM fetches
# an adapter named by its Hub id from the main branch (it takes no revision for adapters), so a pinned one is
# fetched at its commit beforehand and handed to vLLM as a local folder.
HF_CACHE = "/root/.cache/huggingface"
LORA_DIR = f"{HF_CACHE}/lora"


def lora_source(name: str, artifact: str, revision: str | None) -> str:
    """What --lora-modules names for an adapter: its folder once downloaded at a pinned commit, else its Hub id."""
    return f"{LORA_DIR}/{name}" if revision else artifact


def vllm_shm_gib(gpus_per_pod: int) -> float:
    """/dev/shm for NCCL between the pod's GPUs: 1 GiB alone, 2 GiB per GPU with tensor parallelism."""
    return 1.0 if gpus_per_pod == 1 else float(min(16, 2 * gpus_per_pod))


DOWNLOAD_GIB_PER_S = 0.5  # what one pod reads from S3 or the Hugging Face hub


def startup_budget_s(weights_gib_per_pod: float, load_gib_per_s: float = DOWNLOAD_GIB_PER_S) -> int:
    """Seconds a probe waits for a cold start: 5 min plus loading at ``load_gib_per_s`` (~0.5 GiB/s from S3
    or the hub; less where the pod's share of its node's disk is slower: modelfleet.render.k8s.disk)."""
    return 300 + math.ceil(weights_gib_per_pod / load_gib_per_s)
