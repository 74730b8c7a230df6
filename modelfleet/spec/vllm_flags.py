"""What an ``overrides.extra_args`` item sets in vLLM, resolved as vLLM's own parser resolves it, and which of
those settings a model may not make.

vLLM's ``FlexibleArgumentParser`` (vllm/utils/argparse_utils.py) rewrites every ``--`` argument before argparse
sees it: underscores become dashes up to the first ``.`` (``--max_model_len`` is ``--max-model-len``), a
dotted argument sets one key of a JSON flag (``--speculative-config.model x`` is ``--speculative-config``),
``-O3`` is ``--optimization-level 3``, and ``--config FILE`` pulls flags from a YAML file at start. argparse then
takes ``--flag=value``, unique prefixes (``allow_abbrev`` is on in ``vllm serve``: ``--max-model`` is
``--max-model-len``), short forms (``-tp``), values glued to a short form (``-qfp8``), and lets the last of a
repeated flag win. So a flag is recognised here by the argument it *sets* (argparse's ``dest``), looked up in
the table of vLLM's real option strings (data/vllm_flags.yaml, checked against the installed vLLM in CI), and
every spelling is resolved conservatively: a prefix stands for every flag it could abbreviate, case is ignored,
and any token that starts with ``-`` is taken as a flag wherever it sits (argparse does the same with a token
that names an option, even where a value was expected).

Refused, with the key to set instead or the reason:

- ``OWNED``: what the compiler writes from the plan (the model, its name, ports, parallelism, memory, precision,
  context, batching, LoRA, the loader). vLLM keeps the last value, so an extra one would silently win.
- ``LOADS``: what changes which code, weights, tokenizer or configuration load, or which files and endpoints
  the server reads: an unpinned tokenizer or revision, remote code, another model (speculative decoding), a
  config file of flags, plugins and classes by import path, a logging config (its factories run code), local
  files for requests. A pinned model loads exactly the commit its ``revision`` names, and nothing else.
- ``--chat-template`` except as an inline Jinja template (a path or URL reads a file nobody pinned), and
  ``--generation-config`` except ``auto`` or ``vllm`` (a folder).
- ``--`` (it would end the flags) and ``@file`` (no fromfile prefix in vLLM, but never a flag here).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import yaml

FLAGS_FILE = Path(__file__).resolve().parents[1] / "data" / "vllm_flags.yaml"
PARALLEL = "the plan (GPUs, nodes and replicas are placed and priced for it)"

# dest -> the models.yaml key (or compiler decision) that sets it
OWNED: dict[str, str] = {
    "model": "artifact", "served_model_name": "the model's name", "host": "the compiler (0.0.0.0)",
    "port": "the compiler (8000)", "uds": "the compiler (port 8000)",
    "tensor_parallel_size": "overrides.tensor_parallel_size", "pipeline_parallel_size": "overrides.pipeline_parallel_size",
    "data_parallel_size": PARALLEL, "data_parallel_size_local": PARALLEL, "data_parallel_rank": PARALLEL,
    "data_parallel_start_rank": PARALLEL, "data_parallel_address": PARALLEL, "data_parallel_rpc_port": PARALLEL,
    "data_parallel_backend": PARALLEL, "data_parallel_external_lb": PARALLEL, "data_parallel_hybrid_lb": PARALLEL,
    "data_parallel_multi_port_external_lb": PARALLEL, "nnodes": PARALLEL, "node_rank": PARALLEL,
    "master_addr": PARALLEL, "master_port": PARALLEL, "headless": PARALLEL,
    "decode_context_parallel_size": PARALLEL, "prefill_context_parallel_size": PARALLEL,
    "max_model_len": "sla.max_context_tokens", "max_num_seqs": "overrides.max_num_seqs",
    "max_num_batched_tokens": "overrides.max_num_batched_tokens",
    "gpu_memory_utilization": "overrides.gpu_memory_utilization", "kv_cache_memory_bytes": "overrides.gpu_memory_utilization",
    "num_gpu_blocks_override": "overrides.gpu_memory_utilization", "dtype": "size.dtype", "quantization": "quantization",
    "kv_cache_dtype": "overrides.kv_cache_dtype", "enable_prefix_caching": "overrides.enable_prefix_caching",
    "distributed_executor_backend": "the compiler (ray across nodes)", "load_format": "artifact (s3:// streams)",
    "model_loader_extra_config": "artifact (s3:// streams)", "enable_lora": "lora", "lora_modules": "lora.adapters",
    "max_lora_rank": "lora.max_rank", "max_loras": "lora.max_loras", "enable_expert_parallel": "overrides.expert_parallel",
    "revision": "revision", "tokenizer_revision": "revision",
}
_CODE = "runs code the image does not hold (a plugin file, or a class by import path)"
_UNPINNED = "loads files other than the pinned model's: nothing pins them"
# dest -> why it may not be set from models.yaml
LOADS: dict[str, str] = {
    "tokenizer": "loads another repository's tokenizer, unpinned (requirePins cannot see it)",
    "code_revision": "picks the revision of the repository's own code", "trust_remote_code": "runs the repository's code",
    "hf_config_path": _UNPINNED, "config": "reads more flags from a file at start (any of these among them)",
    "download_dir": "moves the weights cache away from the pod's planned disk", "ignore_patterns": _UNPINNED,
    "speculative_config": "loads another model (a draft), unpinned and unplanned", "spec_model": "loads another model",
    "spec_method": "turns on speculative decoding, with a draft model", "spec_tokens": "turns on speculative decoding",
    "default_mm_loras": "loads LoRA adapters outside lora.adapters", "hf_overrides": "rewrites the model's config "
    "(architecture, layers) the plan was sized from", "model_class_overrides": _CODE, "tool_parser_plugin": _CODE,
    "reasoning_parser_plugin": _CODE, "io_processor_plugin": _CODE, "logits_processors": _CODE, "worker_cls": _CODE,
    "worker_extension_cls": _CODE, "scheduler_cls": _CODE, "middleware": _CODE,
    "log_config_file": "reads a logging config whose factories run code", "logging_config": "a logging config "
    "whose factories run code", "kv_transfer_config": "loads a KV connector, by import path",
    "ec_transfer_config": "loads an encoder-cache connector, by import path",
    "weight_transfer_config": "replaces the weights at run time", "tool_server": "calls tool servers at other addresses",
    "allowed_local_media_path": "lets requests read the pod's files", "trust_request_chat_template": "runs "
    "templates requests send", "mm_encoder_fp8_scale_path": _UNPINNED, "mm_encoder_fp8_scale_save_path": "writes files "
    "in the pod", "hf_token": "puts a secret in the manifest: the stack's modelfleet:hfToken is mounted from a Secret",
}
INLINE_ONLY = {"chat_template"}  # a Jinja template written out, never a path or a URL
GENERATION_CONFIG_VALUES = ("auto", "vllm")  # vLLM's own names; anything else is a folder to read
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")  # argparse's: a value, not a flag (vLLM has no such flags)


@functools.cache
def option_table() -> dict[str, str]:
    """vLLM's option strings -> the argument each sets (data/vllm_flags.yaml)."""
    with open(FLAGS_FILE, encoding="utf-8") as handle:
        return dict(yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))["flags"])


def normalised(token: str) -> str | None:
    """The option string vLLM's parser looks up for ``token`` (None: a value, not a flag)."""
    if not token.startswith("-") or token == "-" or _NEGATIVE_NUMBER.match(token):
        return None
    key = token.split("=", 1)[0]
    if key.startswith("-O") and key != "-O" and not key.startswith("--"):
        return "--optimization-level"
    if key.startswith("--"):
        name, dot, rest = key[2:].partition(".")
        return "--" + name.replace("_", "-") if dot else "--" + key[2:].replace("_", "-")
    return key.split(".", 1)[0]


def destinations(token: str) -> tuple[str, ...]:
    """Every argument vLLM could set from ``token``: its own, or, for a prefix, each one it could abbreviate
    (argparse refuses an ambiguous prefix, which is no reason to let it through); case ignored."""
    flag = normalised(token)
    if flag is None:
        return ()
    table = option_table()
    found = set()
    for spelling in {flag, flag.lower()}:
        if spelling in table:
            found.add(table[spelling])
            continue
        for option, dest in table.items():
            long = option.startswith("--")
            if option.startswith(spelling) and (long == spelling.startswith("--")):
                found.add(dest)  # an abbreviation
            elif not long and not spelling.startswith("--") and spelling.startswith(option):
                found.add(dest)  # a short form with its value glued on: -qfp8, -tp4
    return tuple(sorted(found))


def value_after(args: tuple[str, ...], index: int) -> str | None:
    """The value given to the flag at ``index``: after ``=``, else the next item."""
    token = args[index]
    if "=" in token:
        return token.split("=", 1)[1]
    return args[index + 1] if index + 1 < len(args) else None


def refusal(args: tuple[str, ...], index: int) -> tuple[str, str] | None:
    """(message, fix) when ``args[index]`` may not be in extra_args, else None."""
    token = args[index]
    where = f"extra_args[{index}] {token!r}"
    if token == "--" or token.startswith("@"):
        return f"{where} is not a flag vLLM should see here", "write flags as --name value, one item each"
    for dest in destinations(token):
        flag = _spelling(dest)
        if dest in OWNED:
            key = OWNED[dest]
            fix = f"remove it from extra_args: {key} decides it" if key.startswith("the ") else \
                f"remove it from extra_args and set {key}"
            return f"{where} sets vLLM's {flag}, which the compiler writes (from {key})", fix
        if dest in LOADS:
            return f"{where} sets vLLM's {flag}: it {LOADS[dest]}", "remove it from extra_args (see docs/hardening.md)"
        if dest in INLINE_ONLY and not _inline_template(value_after(args, index)):
            return (f"{where} names a chat template file or URL: nothing pins what it reads",
                    "write the template inline (its Jinja text), or use the model's own")
        if dest == "generation_config" and value_after(args, index) not in GENERATION_CONFIG_VALUES:
            return (f"{where} reads a generation config folder: nothing pins it",
                    f"use one of {', '.join(GENERATION_CONFIG_VALUES)}, or leave it out (the model's own)")
    return None


def _inline_template(value: str | None) -> bool:
    return value is not None and ("{{" in value or "{%" in value)


def _spelling(dest: str) -> str:
    """The flag's own long spelling, for messages."""
    longs = sorted((o.startswith("--no-"), len(o), o) for o, d in option_table().items() if d == dest and o[1] == "-")
    return longs[0][2] if longs else dest
