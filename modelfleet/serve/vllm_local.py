"""A compiled ``vllm serve`` argument list, adapted to a real vLLM (CPU build) on this machine. Pure.

Why adapt and not rewrite: the compiled list is what the cluster runs; locally only what needs a GPU
cluster (or the real checkpoint) changes, and each change is returned as a line to print:

* the model: a tiny local Llama directory instead of the hub id / s3 prefix (``--load-format`` and
  ``--model-loader-extra-config`` dropped, and
  ``--quantization``: the tiny model's weights are plain float32, and a quantized checkpoint's method
  cannot load them);
* ``--revision``/``--tokenizer-revision`` dropped (a Hub commit; the model is a local directory);
* ``--tensor-parallel-size``/``--pipeline-parallel-size`` -> 1, ``--distributed-executor-backend`` dropped;
* ``--gpu-memory-utilization`` -> ``--kv-cache-memory-bytes`` (on the CPU it is a share of the NUMA node's
  RAM and the default asks for more than is free; measured in ``modelfleet.engines.tiny_llm``);
* ``--dtype`` -> float32 (bfloat16 crashed on short prompts on the CPU build), ``--max-model-len`` capped to
  the tiny model's context, ``--host``/``--port`` -> loopback and a free port;
* LoRA adapters and expert parallelism dropped: the tiny model has neither adapters nor experts.

Kept exactly: ``--served-model-name``, ``--max-num-seqs``, ``--kv-cache-dtype``, prefix caching.
"""

from __future__ import annotations

from ..plan.types import VllmModelPlan

LOCAL_KV_CACHE = "64M"
TINY_CONTEXT = 2048  # max_position_embeddings of modelfleet.engines.tiny_llm's model
_ADAPTERS = "the LoRA adapters are the real model's (the tiny local model has none)"
DROPPED = {"--distributed-executor-backend": "multi-node executor (one process here)",
           "--load-format": "streaming from S3 (the model is a local directory)",
           "--model-loader-extra-config": "runai_streamer's options (the model is a local directory)",
           "--quantization": "the tiny local model is not quantized",
           "--enable-expert-parallel": "the tiny local model has no experts",
           "--enable-lora": _ADAPTERS, "--lora-modules": _ADAPTERS, "--max-lora-rank": _ADAPTERS,
           "--max-loras": _ADAPTERS,
           "--revision": "the Hub commit (the model is a local directory)",
           "--tokenizer-revision": "the Hub commit (the tokenizer is the local directory's)"}


def _pairs(args: tuple[str, ...]) -> list[tuple[str, tuple[str, ...]]]:
    """``(--flag, its values)`` of a flag list (values never start with ``--``): none for a switch, several
    for a flag that takes a list (``--lora-modules a=x b=y``)."""
    out: list[tuple[str, tuple[str, ...]]] = []
    for token in args:
        if token.startswith("--"):
            out.append((token, ()))
        elif out:
            out[-1] = (out[-1][0], out[-1][1] + (token,))
    return out


def local_vllm_args(model: VllmModelPlan, model_dir: str, port: int) -> tuple[list[str], list[str]]:
    """(api_server arguments, adaptation notes) for ``model`` served from ``model_dir`` on ``port``."""
    flags = _pairs(model.args[3:])  # skip "vllm", "serve", the artifact
    replace = {"--host": "127.0.0.1", "--port": str(port), "--tensor-parallel-size": "1",
               "--pipeline-parallel-size": "1", "--dtype": "float32",
               "--max-model-len": str(min(model.max_model_len, TINY_CONTEXT))}
    args, notes = ["--model", model_dir], [f"model: {model.artifact} -> tiny random Llama in {model_dir}"]
    for flag, values in flags:
        value = " ".join(values)
        if flag in DROPPED:
            notes.append(f"{flag} {value}".rstrip() + f" dropped: {DROPPED[flag]}")
        elif flag == "--gpu-memory-utilization":
            args += ["--kv-cache-memory-bytes", LOCAL_KV_CACHE]
            notes.append(f"--gpu-memory-utilization {value} -> --kv-cache-memory-bytes {LOCAL_KV_CACHE} (CPU)")
        elif flag in replace:
            args += [flag, replace[flag]]
            if replace[flag] != value and flag not in ("--host", "--port"):
                notes.append(f"{flag} {value} -> {replace[flag]}")
        else:
            args += [flag, *values]
    return args, notes
