"""The models.yaml language: what a person writes (``*Spec``), validated by pydantic, frozen.

Every default is documented where it is defined. Cross-field contradictions are model validators so
they are reported with the other problems, located at the model they belong to.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    PositiveFloat,
    PositiveInt,
    Tag,
    field_validator,
    model_validator,
)

from .presets import LLM_PRESETS, ArchitecturePreset
from .units import ParamCount, WeightDtype


class FieldProblem(ValueError):
    """A cross-field problem that belongs to one field: the loader points at ``path`` (inside the model)."""

    def __init__(self, path: tuple[str, ...], message: str, fix: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.fix = fix


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DnsLabel = Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]

CLASSIC_TYPES = ("vision", "nlp", "tabular", "audio", "embedding", "recommender", "other")
ClassicType = Literal["vision", "nlp", "tabular", "audio", "embedding", "recommender", "other"]
Framework = Literal["onnx", "tensorrt", "pytorch", "tensorflow", "openvino", "python"]
TensorDtype = Literal[
    "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "fp16", "bf16", "fp32", "fp64", "string",
]  # fmt: skip
GpuModel = Literal["t4", "a10g", "l4", "l40s", "a100", "h100", "h200"]

S3_URI = r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/[^\s]*)?$"
HF_ID = r"^[A-Za-z0-9][A-Za-z0-9_.\-]*/[A-Za-z0-9][A-Za-z0-9_.\-]*$"


# ---------------------------------------------------------------------------------------------- shared parts
class TensorSpec(Frozen):
    """One input or output tensor of a Triton model. ``dims`` exclude the batch dimension; -1 = variable."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.:\-]*$", max_length=128)]
    dtype: TensorDtype
    dims: Annotated[tuple[int, ...], Field(min_length=1, max_length=8)]

    @field_validator("dims")
    @classmethod
    def _dims_positive(cls, dims: tuple[int, ...]) -> tuple[int, ...]:
        bad = [d for d in dims if d == 0 or d < -1]
        if bad:
            raise ValueError(f"dims must be positive or -1 (variable), got {list(dims)}")
        return dims


class SizeSpec(Frozen):
    """How big the model is: ``params`` with a ``dtype`` (weights = params x bytes), or ``memory_gib``.

    For LLMs with a named architecture preset, ``params`` may be left out and comes from the preset.
    """

    params: ParamCount | None = None
    dtype: WeightDtype | None = None
    memory_gib: Annotated[float, Field(gt=0, le=4096)] | None = None

    @model_validator(mode="after")
    def _one_way(self) -> SizeSpec:
        if self.memory_gib is not None and self.params is not None:
            raise ValueError("give either params (with dtype) or memory_gib, not both")
        if self.params is not None and self.dtype is None:
            raise ValueError("params needs a dtype (fp32, fp16, bf16, fp8, int8 or int4)")
        if self.memory_gib is None and self.params is None and self.dtype is None:
            raise ValueError("give params with dtype (e.g. params: 25M, dtype: fp16) or memory_gib")
        return self


Availability = Annotated[float, Field(ge=90.0, lt=100.0)]
"""Availability target in percent. 99.9 and above means at least two replicas in different zones."""


class EnvironmentPatch(Frozen):
    """Per-environment changes to one model, keyed by stack name (``environments: {dev: {...}}``).

    ``sla``, ``profile`` and ``overrides`` are deep-merged over the model's own and the result is validated
    again, so a patch can never produce an invalid model. ``enabled: false`` leaves the model out of that
    environment (e.g. a 405B model in dev).
    """

    enabled: bool = True
    sla: dict[str, Any] = Field(default_factory=dict)
    profile: dict[str, Any] = Field(default_factory=dict)
    overrides: dict[str, Any] = Field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- classic models
class ClassicSlaSpec(Frozen):
    p99_latency_ms: Annotated[float, Field(gt=0, le=600_000)]
    peak_rps: PositiveFloat
    availability: Availability = 99.9  # most production endpoints promise "three nines"


class ClassicProfileSpec(Frozen):
    """Measured figures (perf_analyzer / model_analyzer). Without them the compiler assumes and warns."""

    rps_per_instance: PositiveFloat | None = None
    measured_on: GpuModel = "a10g"  # the GPU the figures were taken on; others are scaled by FP16 TFLOPS
    compute_ms: PositiveFloat | None = None  # one execution of a full batch, p99
    gpu_memory_gib: Annotated[float, Field(gt=0, le=1024)] | None = None  # per model instance, measured


class ClassicOverridesSpec(Frozen):
    max_batch_size: Annotated[int, Field(ge=0, le=4096)] | None = None
    max_queue_delay_us: Annotated[int, Field(ge=0, le=10_000_000)] | None = None
    queue_timeout_us: Annotated[int, Field(gt=0, le=600_000_000)] | None = None
    max_queue_size: Annotated[int, Field(gt=0, le=1_000_000)] | None = None
    response_cache: bool | None = None
    instance_count: Annotated[int, Field(ge=1, le=16)] | None = None
    replicas: Annotated[int, Field(ge=1, le=1000)] | None = None
    dedicated_gpu: bool | None = None  # never pack this model with others


class ClassicModelSpec(Frozen):
    """A traditional model (vision, NLP, tabular, audio, embedding...) served by Triton."""

    name: DnsLabel
    type: ClassicType
    serving: Literal["triton"] | None = None  # classic models are always Triton's; vLLM serves LLMs only
    framework: Framework
    artifact: Annotated[str, Field(pattern=S3_URI)]  # s3:// directory holding the version folders
    size: SizeSpec
    inputs: Annotated[tuple[TensorSpec, ...], Field(min_length=1)]
    outputs: Annotated[tuple[TensorSpec, ...], Field(min_length=1)]
    sla: ClassicSlaSpec
    # Deterministic models get Triton's response cache: the same input gives the same output.
    deterministic: bool = True
    # Python-backend models must check request.is_cancelled() themselves; say so once it is done.
    handles_cancellation: bool = False
    versions: Annotated[tuple[PositiveInt, ...], Field(min_length=1)] | None = None  # None = latest one
    team: str | None = None
    profile: ClassicProfileSpec = ClassicProfileSpec()
    overrides: ClassicOverridesSpec = ClassicOverridesSpec()
    environments: dict[str, EnvironmentPatch] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> ClassicModelSpec:
        names = [t.name for t in self.inputs + self.outputs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"tensor names must be unique across inputs and outputs: {', '.join(dupes)}")
        if self.overrides.response_cache and not self.deterministic:
            raise FieldProblem(("overrides", "response_cache"),
                               "response_cache: true contradicts deterministic: false (cached answers would be stale)",
                               "drop response_cache or set deterministic: true")
        if self.size.params is None and self.size.memory_gib is None:
            raise ValueError("size needs params (with dtype) or memory_gib")
        return self


# ---------------------------------------------------------------------------------------------- LLMs
class ArchitectureSpec(Frozen):
    """What sizes the KV cache and constrains tensor parallelism."""

    layers: Annotated[int, Field(gt=0, le=1024)]
    attention_heads: Annotated[int, Field(gt=0, le=1024)]
    kv_heads: Annotated[int, Field(gt=0, le=1024)]
    head_dim: Annotated[int, Field(gt=0, le=4096)]
    max_position_embeddings: PositiveInt | None = None

    @model_validator(mode="after")
    def _gqa(self) -> ArchitectureSpec:
        if self.attention_heads % self.kv_heads:
            raise ValueError(
                f"attention_heads ({self.attention_heads}) must be a multiple of kv_heads ({self.kv_heads})"
            )
        return self


class LlmSlaSpec(Frozen):
    max_context_tokens: Annotated[int, Field(ge=128, le=2_097_152)]
    # Exactly one of these two says how much load: sequences in flight, or generated tokens per second.
    peak_concurrent_sequences: Annotated[int, Field(gt=0, le=1_000_000)] | None = None
    peak_output_tokens_per_s: PositiveFloat | None = None
    # KV cache is sized for this many tokens per sequence; default = max_context_tokens (the worst case).
    avg_context_tokens: PositiveInt | None = None
    p99_ttft_ms: Annotated[float, Field(gt=0, le=600_000)]
    availability: Availability = 99.9

    @model_validator(mode="after")
    def _load(self) -> LlmSlaSpec:
        if (self.peak_concurrent_sequences is None) == (self.peak_output_tokens_per_s is None):
            raise ValueError("give exactly one of peak_concurrent_sequences or peak_output_tokens_per_s")
        if self.avg_context_tokens is not None and self.avg_context_tokens > self.max_context_tokens:
            raise ValueError("avg_context_tokens cannot exceed max_context_tokens")
        return self


class LlmProfileSpec(Frozen):
    # Decode speed one sequence sees; converts peak_output_tokens_per_s into concurrent sequences.
    # 30 tokens/s is a typical interactive target for a single stream on a data-centre GPU.
    output_tokens_per_s_per_sequence: PositiveFloat = 30.0


class LlmOverridesSpec(Frozen):
    instance_type: Annotated[str, Field(pattern=r"^[a-z0-9]+\.[a-z0-9]+$")] | None = None
    tensor_parallel_size: Literal[1, 2, 4, 8] | None = None
    pipeline_parallel_size: Annotated[int, Field(ge=1, le=16)] | None = None
    max_num_seqs: Annotated[int, Field(ge=1, le=4096)] | None = None
    replicas: Annotated[int, Field(ge=1, le=1000)] | None = None
    gpu_memory_utilization: Annotated[float, Field(ge=0.5, le=0.98)] | None = None
    kv_cache_dtype: Literal["auto", "fp8"] | None = None
    enable_prefix_caching: bool | None = None


# Weight dtypes each pre-quantized checkpoint format holds (vLLM: AWQ is 4-bit; GPTQ 4- or 8-bit).
CHECKPOINT_DTYPES: dict[str, tuple[str, ...]] = {
    "awq": ("int4",), "awq_marlin": ("int4",), "gptq": ("int4", "int8"), "gptq_marlin": ("int4", "int8"),
    "fp8": ("fp8",), "compressed-tensors": ("fp8", "int8", "int4"),
}


class LlmModelSpec(Frozen):
    """A generative LLM, served by vLLM (or, with a warning, by Triton's vLLM backend)."""

    name: DnsLabel
    type: Literal["llm"]
    serving: Literal["vllm", "triton"] | None = None
    artifact: Annotated[str, Field(pattern=f"{S3_URI}|{HF_ID}")]  # Hugging Face id or s3:// path
    size: SizeSpec
    architecture: str | ArchitectureSpec
    sla: LlmSlaSpec
    # How the checkpoint at `artifact` is already quantized, as its config.json's quantization_config says;
    # passed to vLLM as --quantization. None: a 16-bit checkpoint (size.dtype fp8 then quantizes it while
    # loading). Owned by the compiler's quantization rules (README "Quantized LLMs").
    quantization: Literal["awq", "awq_marlin", "gptq", "gptq_marlin", "fp8", "compressed-tensors"] | None = None
    team: str | None = None
    profile: LlmProfileSpec = LlmProfileSpec()
    overrides: LlmOverridesSpec = LlmOverridesSpec()
    environments: dict[str, EnvironmentPatch] = Field(default_factory=dict)

    @field_validator("architecture")
    @classmethod
    def _known_preset(cls, value: str | ArchitectureSpec) -> str | ArchitectureSpec:
        if isinstance(value, str) and value not in LLM_PRESETS:
            raise ValueError(
                f"unknown architecture preset {value!r}; use one of {', '.join(sorted(LLM_PRESETS))} "
                "or give layers, attention_heads, kv_heads and head_dim"
            )
        return value

    @model_validator(mode="after")
    def _consistent(self) -> LlmModelSpec:
        arch = self.resolved_architecture()
        if self.size.memory_gib is None and self.size.params is None and isinstance(self.architecture, ArchitectureSpec):
            raise ValueError("size.params is required when the architecture is not a named preset")
        limit = arch.max_position_embeddings
        if limit is not None and self.sla.max_context_tokens > limit:
            raise FieldProblem(("sla", "max_context_tokens"),
                               f"{self.sla.max_context_tokens} exceeds the model's max_position_embeddings {limit}",
                               f"use at most {limit}")
        tp = self.overrides.tensor_parallel_size
        if tp is not None and arch.attention_heads % tp:
            raise FieldProblem(("overrides", "tensor_parallel_size"),
                               f"{tp} does not divide the model's {arch.attention_heads} attention heads",
                               "pick a tensor_parallel_size that divides them, or leave it to the compiler")
        return self

    @model_validator(mode="after")
    def _quantized_checkpoint(self) -> LlmModelSpec:
        """int8/int4 weights exist only in a pre-quantized checkpoint; a declared one fixes the dtype."""
        allowed = CHECKPOINT_DTYPES.get(self.quantization or "", ("fp32", "fp16", "bf16", "fp8", None))
        if self.size.dtype in allowed:
            return self
        if self.quantization is None:
            raise FieldProblem(("size", "dtype"), f"{self.size.dtype} weights need a pre-quantized checkpoint: vLLM "
                               "quantizes a 16-bit checkpoint only to fp8 while loading",
                               "declare the checkpoint's format (quantization: awq or gptq) and point artifact at it, "
                               "or use dtype fp8 or bf16")
        raise FieldProblem(("quantization",), f"a {self.quantization} checkpoint holds {' or '.join(map(str, allowed))} "
                           f"weights, not {self.size.dtype or 'an unspecified dtype'}",
                           f"set size.dtype: {allowed[0]}")

    def resolved_architecture(self) -> ArchitectureSpec:
        if isinstance(self.architecture, ArchitectureSpec):
            return self.architecture
        p: ArchitecturePreset = LLM_PRESETS[self.architecture]
        return ArchitectureSpec(
            layers=p.layers,
            attention_heads=p.attention_heads,
            kv_heads=p.kv_heads,
            head_dim=p.head_dim,
            max_position_embeddings=p.max_position_embeddings,
        )

    def resolved_params(self) -> int | None:
        if self.size.params is not None:
            return self.size.params
        if isinstance(self.architecture, str):
            return LLM_PRESETS[self.architecture].params
        return None


# ---------------------------------------------------------------------------------------------- the catalogue
def _model_kind(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "LlmModelSpec" if kind == "llm" else "ClassicModelSpec"


ModelSpec = Annotated[
    Union[Annotated[ClassicModelSpec, Tag("ClassicModelSpec")], Annotated[LlmModelSpec, Tag("LlmModelSpec")]],
    Discriminator(_model_kind),
]
MODEL_TAGS = ("ClassicModelSpec", "LlmModelSpec")


class FleetSpec(Frozen):
    """The whole models.yaml."""

    models: Annotated[tuple[ModelSpec, ...], Field(min_length=1)]
    # Unique names are checked by the loader, which can point at the second occurrence's line.

    def model(self, name: str) -> ClassicModelSpec | LlmModelSpec:
        return next(m for m in self.models if m.name == name)


def is_llm(model: ClassicModelSpec | LlmModelSpec) -> bool:
    return isinstance(model, LlmModelSpec)
