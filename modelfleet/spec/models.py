"""The models.yaml language: what a person writes (``*Spec``), validated by pydantic, frozen.

Every default is documented where it is defined. Cross-field contradictions are model validators so
they are reported with the other problems, located at the model they belong to.

Types are strict: YAML already says what a scalar is, so ``peak_rps: "100"``, ``peak_rps: true`` and
``deterministic: no`` are errors, not silently converted (an integer is still a number). Numbers are
finite (no ``.inf``/``.nan``) and every one has an upper bound, named with its reason in the field's
``description`` (which editors show from models.schema.json, and errors repeat as their fix): a value
beyond it is a typo or a unit mistake, and would only make the planner overflow or spin.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from .built_for import BuiltForSpec, check_built_for
from .warmup import WarmupSpec, check_warmup
from .architecture import ArchitectureConfigSpec, ArchitectureSpec, ResolvedArchitecture, resolve
from .llm_options import IMAGE, ExtraArgs, HubSpec, LoraSpec, check_extra_args
from .pipelines import PipelineSpec
from .presets import LLM_PRESETS, presets_of_size, sizes_named
from .profiles import ClassicProfileSpec, GpuModel, LlmProfileSpec  # noqa: F401  (part of this module's API)
from .request_size import REQUEST_SIZE_FIX, request_size_problem
from .team import Team
from .traffic import TrafficSpec, traffic_mean, traffic_problem
from .rollout import RolloutSpec
from .tensors import LIST, Frozen, TensorDtype, TensorSpec  # noqa: F401  (part of this module's API)
from .triton_options import Device, PrioritySpec, StatefulSpec, check_model_options, check_priorities
from .units import WeightDtype, format_param_count
from .versions import AbSplitSpec, TritonVersion, ab_split_problem, revision_problem
from .values import (  # noqa: F401  (FieldProblem, lists_as_tuples, s3_problem: part of this module's API)
    MAX_CONTEXT_TOKENS,
    MAX_DIM,
    MAX_LATENCY_MS,
    MAX_OUTPUT_TOKENS_PER_S,
    MAX_PARAMS,
    MAX_PEAK_RPS,
    MAX_TPOT_MS,
    MAX_POSITION_EMBEDDINGS,
    MAX_SEQUENCES,
    MAX_VERSION,
    FieldProblem,
    LlmArtifact,
    Params,
    TritonArtifact,
    lists_as_tuples,
    quantity,
    s3_problem,
)


DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
DnsLabel = Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]

CLASSIC_TYPES = ("vision", "nlp", "tabular", "audio", "embedding", "recommender", "other")
ClassicType = Literal["vision", "nlp", "tabular", "audio", "embedding", "recommender", "other"]
Framework = Literal["onnx", "tensorrt", "pytorch", "tensorflow", "openvino", "python"]

# ---------------------------------------------------------------------------------------------- shared parts
class SizeSpec(Frozen):
    """How big the model is: ``params`` with a ``dtype`` (weights = params x bytes), or ``memory_gib``.

    For LLMs with a named architecture preset, ``params`` may be left out and comes from the preset.
    """

    params: Params | None = None
    dtype: WeightDtype | None = None
    memory_gib: quantity(0.001, 4096, "GPU memory of one model instance in GiB, 0.001 to 4,096 (a whole 8-GPU "
                                       "node holds about 1,100)", low_inclusive=True, optional=True) = None

    @model_validator(mode="after")
    def _one_way(self) -> SizeSpec:
        if self.memory_gib is not None and self.params is not None:
            raise FieldProblem((), "give either params (with dtype) or memory_gib, not both",
                               "keep memory_gib for a measured footprint, else params with dtype")
        if self.params is not None and self.dtype is None:
            raise FieldProblem((), "params needs a dtype", "add dtype: fp32, fp16, bf16, fp8, int8 or int4")
        if self.memory_gib is None and self.params is None and self.dtype is None:
            raise FieldProblem((), "the size is missing", "give params with dtype (e.g. params: 25M, dtype: fp16), "
                               "or memory_gib")
        return self


Availability = Annotated[float, Field(ge=90.0, lt=100.0, description=(
    "availability target in percent, at least 90 and below 100 (100% is not a target any fleet can meet); "
    "99.9 and above means at least two replicas in different zones"))]
"""Availability target in percent. 99.9 and above means at least two replicas in different zones."""


class EnvironmentPatch(Frozen):
    """Per-environment changes to one model, keyed by stack name (``environments: {dev: {...}}``).

    ``sla``, ``profile`` and ``overrides`` are deep-merged over the model's own and the result is validated
    again, so a patch can never produce an invalid model. ``enabled: false`` leaves the model out of that
    environment (e.g. a 405B model in dev).
    """

    enabled: bool = True
    sla: dict[str, Any] = Field(default_factory=dict)  # validated once merged: the model's own bounds apply
    profile: dict[str, Any] = Field(default_factory=dict)
    overrides: dict[str, Any] = Field(default_factory=dict)


# ---------------------------------------------------------------------------------------------- classic models
class ClassicSlaSpec(Frozen):
    p99_latency_ms: quantity(1, MAX_LATENCY_MS, "p99 latency target in milliseconds, 1 to 600,000 (below 1 ms "
                                                 "Triton's own scheduling is the budget; beyond ten minutes a "
                                                 "request is a batch job)", low_inclusive=True)
    peak_rps: quantity(0.001, MAX_PEAK_RPS, "requests per second at peak, 0.001 to 10,000,000 per model (split "
                                             "a larger load across several models)", low_inclusive=True)
    availability: Availability = 99.9  # most production endpoints promise "three nines"
    # Priority classes, ranked by p99 (triton_options.PrioritySpec); None: one class, one queue.
    priorities: Optional[dict[str, PrioritySpec]] = None
    # The class of a request that names none. None: the last (lowest) one, so unlabelled traffic can never
    # delay a class that asked to go first.
    default_priority: Optional[str] = None

    @model_validator(mode="after")
    def _priorities(self) -> ClassicSlaSpec:
        check_priorities(self.priorities, self.p99_latency_ms)
        if self.default_priority is not None and self.default_priority not in (self.priorities or {}):
            raise FieldProblem(("default_priority",), f"{self.default_priority!r} is not one of the priority classes",
                               f"use one of: {', '.join(self.priorities)}" if self.priorities else
                               "declare sla.priorities, or drop default_priority")
        return self


class ClassicOverridesSpec(Frozen):
    max_batch_size: quantity(0, 4096, "Triton max_batch_size, 0 (no batching) to 4,096", low_inclusive=True,
                              kind=int, optional=True) = None
    max_queue_delay_us: quantity(0, 10_000_000, "batching window in microseconds, 0 to 10,000,000 (10 s)",
                                  low_inclusive=True, kind=int, optional=True) = None
    queue_timeout_us: quantity(0, 600_000_000, "how long a request may queue, microseconds; at most 600,000,000 "
                                "(the longest p99 allowed)", kind=int, optional=True) = None
    max_queue_size: quantity(0, 1_000_000, "requests one model may queue; at most 1,000,000", kind=int,
                              optional=True) = None
    response_cache: bool | None = None
    instance_count: quantity(1, 16, "model instances per GPU, 1 to 16", low_inclusive=True, kind=int,
                              optional=True) = None
    replicas: quantity(1, 1000, "server replicas, 1 to 1,000", low_inclusive=True, kind=int, optional=True) = None
    dedicated_gpu: bool | None = None  # never pack this model with others


class ClassicModelSpec(Frozen):
    """A traditional model (vision, NLP, tabular, audio, embedding...) served by Triton."""

    name: DnsLabel
    type: ClassicType
    serving: Literal["triton"] | None = None  # classic models are always Triton's; vLLM serves LLMs only
    framework: Framework
    artifact: TritonArtifact  # s3:// directory holding the version folders
    size: SizeSpec
    # One request (batch 1) must fit what Triton accepts over HTTP: spec/request_size.py says why 64 MiB.
    inputs: Annotated[tuple[TensorSpec, ...], Field(
        **LIST, min_length=1, max_length=256,
        description="the model's input tensors; one request's inputs (batch 1, -1 dimensions at 1 element) take at "
                    "most 64 MiB, what Triton accepts in one HTTP request (--http-max-input-size's default)")]
    outputs: Annotated[tuple[TensorSpec, ...], Field(**LIST, min_length=1, max_length=256)]
    sla: ClassicSlaSpec
    # Deterministic models get Triton's response cache: the same input gives the same output.
    deterministic: bool = True
    # Python-backend models must check request.is_cancelled() themselves; say so once it is done.
    handles_cancellation: bool = False
    # None = the latest one. Triton version folders are int64; at most 64 served at once.
    versions: Annotated[Optional[Annotated[tuple[Annotated[int, Field(strict=True, gt=0, le=MAX_VERSION)], ...],
                                           Field(**LIST, min_length=1, max_length=64)]],
                        Field(description="Triton version folders to serve at once: positive int64 numbers, 1 to "
                                          "64 of them; default the latest. To pin one, write version")] = None
    # The pinned version folder (spec/versions.py); None: unpinned (an error in a stack with requirePins).
    version: Optional[TritonVersion] = None
    # How a change ships (spec/rollout.py); None: the stack's modelfleet:rollout, else rolling.
    rollout: Optional[RolloutSpec] = None
    # A held A/B split between two of its versions (spec/versions.py); None: no split.
    ab_split: Optional[AbSplitSpec] = None
    team: Team = None  # None: the cost report's and the labels' 'unassigned'
    # Models of one pool share Triton servers only with each other, and the servers are named after it
    # (triton-<pool>); without one, a model is in its instance type's pool (triton-g5-xlarge). A pool of its
    # own costs GPUs that sharing would save: plan shows each server's members.
    pool: Annotated[Optional[DnsLabel], Field(description="Triton server pool: models of a pool share servers "
                                                          "only with each other; servers are named triton-<pool>")] = None
    # gpu or cpu (KIND_CPU on a CPU node group). None: a GPU, except a tabular or python model with a
    # measured profile.cpu, which the compiler moves to a CPU when that is cheaper within the SLA
    # (plan/triton/devices.py). cpu takes an onnx, pytorch or python model (triton_options.CPU_FRAMEWORKS).
    device: Optional[Device] = None
    # The GPU (and TensorRT release) a GPU-specific artifact was compiled for (spec/built_for.py): required for a
    # TensorRT plan; None: the artifact runs on any GPU (ONNX, TorchScript, SavedModel, python).
    built_for: Optional[BuiltForSpec] = None
    # Sample inputs Triton warms the model with (spec/warmup.py); None: zeros for every input, and no warmup
    # at all for a model with a string input (zeros are no valid encoded value; the plan asks for a sample).
    warmup: Optional[WarmupSpec] = None
    stateful: Optional[StatefulSpec] = None  # Triton's sequence batcher (triton_options.StatefulSpec)
    # A python-backend model that sends several responses per request (decoupled); its SLA is the first one.
    streaming: bool = False
    profile: ClassicProfileSpec = ClassicProfileSpec()
    overrides: ClassicOverridesSpec = ClassicOverridesSpec()
    environments: dict[str, EnvironmentPatch] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _options(self) -> ClassicModelSpec:
        check_model_options(self)
        check_built_for(self)
        check_warmup(self)
        return self

    @model_validator(mode="after")
    def _consistent(self) -> ClassicModelSpec:
        names = [t.name for t in self.inputs + self.outputs]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise FieldProblem((), f"tensor names must be unique across inputs and outputs: {', '.join(dupes)}",
                               "rename one of each pair")
        if self.version is not None and self.versions is not None:
            raise FieldProblem(("version",), "give version (the one pinned folder) or versions (several served at "
                               "once), not both", "keep version: N to pin one folder")
        if problem := ab_split_problem(self.ab_split, self.versions):
            raise problem
        if self.overrides.response_cache and not self.deterministic:
            raise FieldProblem(("overrides", "response_cache"),
                               "response_cache: true contradicts deterministic: false (cached answers would be stale)",
                               "drop response_cache or set deterministic: true")
        if self.size.params is None and self.size.memory_gib is None:
            raise FieldProblem(("size",), "a classic model's size needs params or memory_gib",
                               "add params (e.g. params: 25M) or memory_gib")
        if problem := request_size_problem(self.inputs):
            raise FieldProblem(("inputs",), problem, REQUEST_SIZE_FIX)
        return self


# ---------------------------------------------------------------------------------------------- LLMs
def _architecture_kind(value: Any) -> str | None:
    if isinstance(value, str):
        return "PresetName"
    if isinstance(value, ArchitectureConfigSpec) or (isinstance(value, dict) and "config" in value):
        return "ArchitectureConfigSpec"
    return "ArchitectureSpec" if isinstance(value, (dict, ArchitectureSpec)) else None


# A preset's name, the model's config.json, or the figures themselves (spec/architecture.py). Discriminated by
# the YAML's own shape, so an error in one form is not repeated as "not the other forms either".
Architecture = Annotated[
    Union[Annotated[Annotated[str, WithJsonSchema({"type": "string", "enum": sorted(LLM_PRESETS)})], Tag("PresetName")],
          Annotated[ArchitectureConfigSpec, Tag("ArchitectureConfigSpec")],
          Annotated[ArchitectureSpec, Tag("ArchitectureSpec")]],
    Discriminator(_architecture_kind, custom_error_type="architecture_form",
                  custom_error_message="expected a preset name, {config: path of the model's config.json}, or a "
                                       "mapping of layers, attention_heads, kv_heads and head_dim"),
]
ARCHITECTURE_FORMS = (f"add `architecture:` with a preset ({', '.join(sorted(LLM_PRESETS))}); or the model's own "
                      "config.json committed beside models.yaml: `architecture: {config: models/<name>/config.json}`; "
                      "or the figures: `architecture: {layers: 32, attention_heads: 32, kv_heads: 8, head_dim: 128}`")

# A request's shape when the SLA does not say: a short chat answer. The prompt then fills the rest of the
# context, the worst case for time to first token and KV cache (what plans assumed before these fields).
DEFAULT_OUTPUT_TOKENS = 256


class LlmSlaSpec(Frozen):
    max_context_tokens: quantity(128, MAX_CONTEXT_TOKENS, "longest prompt + output in tokens, 128 to 2,097,152",
                                  low_inclusive=True, kind=int)
    # Exactly one of these three says how much load: sequences in flight, generated tokens per second, or
    # requests per second (each of avg_output_tokens).
    peak_concurrent_sequences: quantity(0, MAX_SEQUENCES, "sequences in flight at peak; at most 1,000,000 per "
                                         "model", kind=int, optional=True) = None
    peak_output_tokens_per_s: quantity(0, MAX_OUTPUT_TOKENS_PER_S, "generated tokens per second at peak; at "
                                        "most 100,000,000 per model", optional=True) = None
    peak_requests_per_s: quantity(0, MAX_PEAK_RPS, "requests per second at peak (each of avg_input_tokens in and "
                                  "avg_output_tokens out); at most 10,000,000 per model", optional=True) = None
    # The request's shape. Defaults: DEFAULT_OUTPUT_TOKENS out (at most a quarter of the context), and a prompt
    # filling the rest of max_context_tokens (the worst case for TTFT and the KV cache).
    avg_input_tokens: quantity(0, MAX_CONTEXT_TOKENS, "prompt tokens of an average request; default: the rest of "
                               "max_context_tokens after avg_output_tokens (the worst case)", kind=int,
                               optional=True) = None
    avg_output_tokens: quantity(0, MAX_CONTEXT_TOKENS, "generated tokens of an average request; default 256, at "
                                "most a quarter of max_context_tokens", kind=int, optional=True) = None
    # KV cache is sized for this many tokens per sequence; default = avg_input_tokens + avg_output_tokens.
    avg_context_tokens: quantity(0, MAX_CONTEXT_TOKENS, "tokens the KV cache is sized for per sequence; at most "
                                  "max_context_tokens", kind=int, optional=True) = None
    p99_ttft_ms: quantity(1, MAX_LATENCY_MS, "p99 time to first token in milliseconds, 1 to 600,000",
                           low_inclusive=True)
    # None: no TPOT target; max_num_seqs is then bounded by the KV cache alone, and the plan says so.
    p99_tpot_ms: quantity(1, MAX_TPOT_MS, "p99 time per output token (inter-token latency of a stream) in "
                          "milliseconds, 1 to 10,000 (ten seconds per token is no longer a stream)",
                          low_inclusive=True, optional=True) = None
    availability: Availability = 99.9
    # How requests arrive and how long they are (spec/traffic.py); None: the peak key's arrival process
    # (traffic.py's docstring) with fixed lengths at avg_input_tokens / avg_output_tokens.
    traffic: Optional[TrafficSpec] = None

    @model_validator(mode="after")
    def _load(self) -> LlmSlaSpec:
        loads = [self.peak_concurrent_sequences, self.peak_output_tokens_per_s, self.peak_requests_per_s]
        given = sum(load is not None for load in loads)
        if given != 1:
            raise FieldProblem((), "give exactly one of peak_concurrent_sequences, peak_output_tokens_per_s or "
                               "peak_requests_per_s", "keep one of them" if given else "add the load at peak: "
                               "peak_concurrent_sequences (sequences in flight), peak_output_tokens_per_s or "
                               "peak_requests_per_s")
        if self.avg_context_tokens is not None and self.avg_context_tokens > self.max_context_tokens:
            raise FieldProblem(("avg_context_tokens",), f"avg_context_tokens ({self.avg_context_tokens}) cannot "
                               f"exceed max_context_tokens ({self.max_context_tokens})",
                               f"use at most {self.max_context_tokens}, or leave it out")
        self._shape()
        if self.traffic is not None:
            traffic_problem(self)
        return self

    def _shape(self) -> None:
        out, context = self.output_tokens(), self.max_context_tokens
        if out >= context:
            raise FieldProblem(("avg_output_tokens",), f"avg_output_tokens ({out}) leaves no room for a prompt in "
                               f"max_context_tokens ({context})", f"use less than {context}")
        if self.input_tokens() + out > context:
            raise FieldProblem(("avg_input_tokens",), f"avg_input_tokens + avg_output_tokens ({self.input_tokens()} "
                               f"+ {out}) exceed max_context_tokens ({context})",
                               f"use at most {context - out} input tokens, or raise max_context_tokens")

    def output_tokens(self) -> int:
        declared = traffic_mean(self.traffic, "output")
        return self.avg_output_tokens or declared or min(DEFAULT_OUTPUT_TOKENS, self.max_context_tokens // 4)

    def input_tokens(self) -> int:
        declared = traffic_mean(self.traffic, "input")
        return self.avg_input_tokens or declared or self.max_context_tokens - self.output_tokens()

    def arrivals(self) -> str:
        """How requests arrive at peak: the declared process, else the peak key's (spec/traffic.py)."""
        if self.traffic is not None and self.traffic.arrivals is not None:
            return self.traffic.arrivals
        return "closed" if self.peak_concurrent_sequences is not None else "poisson"

    def context_tokens(self) -> int:
        """Tokens the KV cache holds per sequence at its end, on average."""
        return self.avg_context_tokens or self.input_tokens() + self.output_tokens()


class LlmOverridesSpec(Frozen):
    instance_type: Annotated[str, Field(pattern=r"^[a-z0-9]+\.[a-z0-9]+$")] | None = None
    tensor_parallel_size: Literal[1, 2, 4, 8] | None = None
    pipeline_parallel_size: quantity(1, 16, "nodes one replica spans, 1 to 16", low_inclusive=True, kind=int,
                                      optional=True) = None
    max_num_seqs: quantity(1, 4096, "vLLM --max-num-seqs, 1 to 4,096", low_inclusive=True, kind=int,
                            optional=True) = None
    replicas: quantity(1, 1000, "replicas, 1 to 1,000", low_inclusive=True, kind=int, optional=True) = None
    gpu_memory_utilization: quantity(0.5, 0.98, "vLLM --gpu-memory-utilization, 0.5 to 0.98 (above it the "
                                      "CUDA context and activations run out of room)", low_inclusive=True,
                                      optional=True) = None
    kv_cache_dtype: Literal["auto", "fp8"] | None = None
    enable_prefix_caching: bool | None = None
    # vLLM --max-num-batched-tokens: the prompt tokens one engine step takes beside the decoding sequences.
    # None: the compiler chooses it (plan/llm_batching.py).
    max_num_batched_tokens: quantity(256, 1_048_576, "vLLM --max-num-batched-tokens, 256 to 1,048,576",
                                     low_inclusive=True, kind=int, optional=True) = None
    # vLLM --enable-expert-parallel for a MoE model: true or false pins it; None: the compiler compares both.
    expert_parallel: bool | None = None
    extra_args: ExtraArgs = ()

    @field_validator("extra_args")
    @classmethod
    def _extra_args(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        check_extra_args(value)
        return value


# Weight dtypes each pre-quantized checkpoint format holds (vLLM: AWQ is 4-bit; GPTQ 4- or 8-bit).
CHECKPOINT_DTYPES: dict[str, tuple[str, ...]] = {
    "awq": ("int4",), "awq_marlin": ("int4",), "gptq": ("int4", "int8"), "gptq_marlin": ("int4", "int8"),
    "fp8": ("fp8",), "compressed-tensors": ("fp8", "int8", "int4"), "mxfp4": ("int4",),
}
QUANTIZATIONS = Literal["awq", "awq_marlin", "gptq", "gptq_marlin", "fp8", "compressed-tensors", "mxfp4"]


# LLM engines modelfleet refuses, and why (docs/triton-features.md, "LLMs on Triton"): each is an error located
# at ``serving`` with the fix, rather than a plan that passes every check and fails in the cluster.
REFUSED_LLM_SERVING = {
    "triton": ("Triton's vLLM backend is not offered: its metrics adapter reports vLLM's token counters and "
               "latency histograms but no waiting or running request gauge (vllm_backend src/utils/metrics.py, "
               "the vLLM V1 adapter), and Triton's own nv_inference_pending_request_count stays at 0 because the "
               "backend hands every request to vLLM's engine at once, so no autoscaler could see its queue; it "
               "also has no OpenAI API and no pipeline parallelism across nodes"),
    "triton-trtllm": ("TensorRT-LLM on Triton is not offered: it serves engines built by trtllm-build for one GPU "
                      "model, tensor-parallel size and TensorRT-LLM release, while the compiler chooses the GPU "
                      "when it plans; an engine for that choice cannot be built or checked before the deploy"),
}


class LlmModelSpec(Frozen):
    """A generative LLM, served by vLLM (``serving: triton`` and ``triton-trtllm`` are refused, with the reason)."""

    name: DnsLabel
    type: Literal["llm"]
    serving: Literal["vllm"] | None = None  # vLLM's own OpenAI server: the only LLM engine offered
    artifact: LlmArtifact  # Hugging Face id or s3:// path
    size: SizeSpec
    architecture: Architecture
    sla: LlmSlaSpec
    # How the checkpoint at `artifact` is already quantized, as its config.json's quantization_config says;
    # passed to vLLM as --quantization. None: a 16-bit checkpoint (size.dtype fp8 then quantizes it while
    # loading). Owned by the compiler's quantization rules (docs/concepts/decisions.md, "Quantized LLMs").
    # (mxfp4: gpt-oss's own 4-bit experts.)
    quantization: QUANTIZATIONS | None = None
    # The precisions the compiler may serve the weights at; the cheapest plan that meets the SLA wins (ties: the
    # checkpoint's own). ``auto``: the checkpoint's own size.dtype, and fp8 where vLLM can quantize the 16-bit
    # checkpoint while loading; or a list of those. None: size.dtype exactly (quality is the owner's call, so
    # the compiler never lowers it unasked).
    precision: Annotated[Optional[Union[Literal["auto"], Annotated[tuple[WeightDtype, ...], Field(
        **LIST, min_length=1, max_length=6)]]], Field(description=(
        "precisions the compiler may serve the weights at, cheapest meeting the SLA wins: auto (size.dtype, and "
        "fp8 for a 16-bit checkpoint) or a list of them; default: size.dtype only"))] = None
    # The pinned checkpoint (spec/versions.py): a Hub commit, or an immutable sub-prefix of an s3:// artifact.
    # None: unpinned (an error in a stack with requirePins).
    revision: Annotated[Optional[str], Field(max_length=128, description=(
        "Hugging Face: the 40-hex commit (vLLM --revision); s3://: the immutable sub-prefix holding the "
        "checkpoint"))] = None
    rollout: Optional[RolloutSpec] = None  # how a change ships (spec/rollout.py); None: the stack's, else rolling
    team: Team = None  # None: the cost report's and the labels' 'unassigned'
    # The vLLM image of this model alone; None: the stack's modelfleet:vllm.image (spec/llm_options.py).
    image: Annotated[Optional[str], Field(pattern=IMAGE, max_length=512, description=(
        "the vLLM container image for this model, e.g. vllm/vllm-openai:v0.11.0; default: the stack's"))] = None
    lora: Optional[LoraSpec] = None  # LoRA adapters served on top of it (spec/llm_options.py)
    hub: HubSpec = HubSpec()  # what the Hugging Face repository asks of a reader (spec/llm_options.py)
    profile: LlmProfileSpec = LlmProfileSpec()
    overrides: LlmOverridesSpec = LlmOverridesSpec()
    environments: dict[str, EnvironmentPatch] = Field(default_factory=dict)

    @field_validator("serving", mode="before")
    @classmethod
    def _offered_engine(cls, value: Any) -> Any:
        if isinstance(value, str) and value in REFUSED_LLM_SERVING:
            raise FieldProblem((), REFUSED_LLM_SERVING[value], "use serving: vllm (the default): the same vLLM "
                               "engine behind its OpenAI API, scaled on vllm:num_requests_waiting")
        return value

    @field_validator("architecture")
    @classmethod
    def _known_preset(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str) and value not in LLM_PRESETS:
            # a preset of the size the artifact names first: a typo must not suggest a bigger model
            named = sorted(p for size in sizes_named(str(info.data.get("artifact", ""))) for p in presets_of_size(size, value))
            close = (difflib.get_close_matches(value.lower(), named, n=1, cutoff=0.5)
                     or difflib.get_close_matches(value.lower(), sorted(LLM_PRESETS), n=1, cutoff=0.7))
            raise FieldProblem((), f"unknown architecture preset {value!r}; the presets are "
                               f"{', '.join(sorted(LLM_PRESETS))}",
                               f"did you mean `{close[0]}`?" if close else
                               "use a preset, give {config: path of the model's config.json}, or give layers, "
                               "attention_heads, kv_heads and head_dim")
        return value

    @model_validator(mode="after")
    def _preset_matches(self) -> LlmModelSpec:
        """A preset must be the model the artifact names and the size declares (a typo's suggestion could
        otherwise double the cost unnoticed)."""
        if not isinstance(self.architecture, str):
            return self
        preset, params = self.architecture, LLM_PRESETS[self.architecture].params
        named, own = sizes_named(self.artifact), sizes_named(preset)
        if named and not named & own:
            size = sorted(named)[0]
            same = presets_of_size(size, preset)
            raise FieldProblem(("architecture",), f"preset {preset} is a {format_param_count(params)} model, but the "
                               f"artifact {self.artifact} names {size}B", (f"use architecture: {same[0]}" if same else
                               "use architecture: {config: ...} with the model's own config.json") +
                               ", or point artifact at the model this preset describes")
        declared = self.size.params
        if declared is not None and not 0.9 <= declared / params <= 1.1:
            raise FieldProblem(("size", "params"), f"size.params {format_param_count(declared)} contradicts preset "
                               f"{preset} ({format_param_count(params)})", "leave size.params out (the preset knows "
                               "it), or pick the preset of the model you serve")
        return self

    @model_validator(mode="after")
    def _consistent(self) -> LlmModelSpec:
        arch = self.resolved_architecture()
        if self.size.memory_gib is None and self.size.params is None and isinstance(self.architecture, ArchitectureSpec):
            raise FieldProblem(("size",), "size.params is required when the architecture is given as figures",
                               "add params, e.g. params: 8B, or use a preset or the model's config.json")
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
        if self.overrides.expert_parallel and not arch.is_moe:
            raise FieldProblem(("overrides", "expert_parallel"), "expert parallelism needs a mixture-of-experts model",
                               "remove it")
        self._bounded_load()
        problem = None if self.revision is None else revision_problem(self.revision, self.artifact)
        if problem:
            raise problem
        return self

    def _bounded_load(self) -> None:
        """Tokens/s become sequences through the profile's decode speed: the result has the same bound."""
        rate, speed = self.sla.peak_output_tokens_per_s, self.profile.output_tokens_per_s_per_sequence
        if rate is not None and rate / speed > MAX_SEQUENCES:
            raise FieldProblem(("sla", "peak_output_tokens_per_s"),
                               f"{rate:g} tokens/s at {speed:g} tokens/s per sequence is {rate / speed:,.0f} "
                               f"sequences in flight, more than the {MAX_SEQUENCES:,} one model may have",
                               "check the figure, or raise profile.output_tokens_per_s_per_sequence if each "
                               "sequence decodes faster")

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

    @model_validator(mode="after")
    def _precisions(self) -> LlmModelSpec:
        if not isinstance(self.precision, tuple):
            return self
        allowed = self.allowed_precisions()
        wrong = [p for p in self.precision if p not in allowed]
        if wrong:
            raise FieldProblem(("precision",), f"{', '.join(wrong)}: the checkpoint ({self.size.dtype or 'bf16'}"
                               + (f", {self.quantization}" if self.quantization else "") + ") can be served at "
                               f"{' or '.join(allowed)} only", f"list some of {', '.join(allowed)}, or use auto")
        return self

    def allowed_precisions(self) -> tuple[str, ...]:
        """The weight dtypes this checkpoint can be served at: its own, and fp8 where vLLM quantizes a 16-bit
        checkpoint while loading (not a pre-quantized one)."""
        own = self.size.dtype or "bf16"
        online = self.quantization is None and own in ("bf16", "fp16", "fp32")
        return (own, "fp8") if online else (own,)

    def precisions(self) -> tuple[str, ...]:
        """The weight dtypes the compiler weighs, the checkpoint's own first when it is one of them."""
        if self.precision is None:
            return (self.size.dtype or "bf16",)
        wanted = self.allowed_precisions() if self.precision == "auto" else self.precision
        return tuple(p for p in self.allowed_precisions() if p in wanted)

    def resolved_architecture(self) -> ResolvedArchitecture:
        return resolve(self.architecture)

    def hub_gated(self) -> tuple[bool, str]:
        """(whether reading the Hub needs the stack's hfToken, why): hub.gated as declared, else the preset's
        knowledge of its own repository, else needed (the repository may be gated or private)."""
        if self.hub.gated is not None:
            return self.hub.gated, f"hub.gated: {str(self.hub.gated).lower()}"
        preset = LLM_PRESETS.get(self.architecture) if isinstance(self.architecture, str) else None
        if preset is not None and preset.gated is not None and preset.repo.lower() == self.artifact.lower():
            return preset.gated, f"preset {self.architecture}: {preset.repo} is {'gated' if preset.gated else 'not gated'}"
        return True, "the repository may be gated or private (say hub: {gated: false} if anyone may download it)"

    def resolved_params(self) -> int | None:
        """Declared, or the preset's published count; None: the planner counts them from the figures."""
        if self.size.params is not None:
            return self.size.params
        return self.resolved_architecture().params


# ---------------------------------------------------------------------------------------------- the catalogue
def _model_kind(value: Any) -> str:
    kind = value.get("type") if isinstance(value, dict) else getattr(value, "type", None)
    return "LlmModelSpec" if kind == "llm" else "ClassicModelSpec"


ModelSpec = Annotated[
    Union[Annotated[ClassicModelSpec, Tag("ClassicModelSpec")], Annotated[LlmModelSpec, Tag("LlmModelSpec")]],
    Discriminator(_model_kind),
]
MODEL_TAGS = ("ClassicModelSpec", "LlmModelSpec")
#: Every union tag pydantic puts in an error's location (the loader drops them from the path it shows).
UNION_TAGS = {"ClassicModelSpec": ClassicModelSpec, "LlmModelSpec": LlmModelSpec, "PresetName": None,
              "ArchitectureSpec": ArchitectureSpec, "ArchitectureConfigSpec": ArchitectureConfigSpec}


class FleetSpec(Frozen):
    """The whole models.yaml."""

    models: Annotated[tuple[ModelSpec, ...], Field(**LIST, min_length=1, max_length=100_000)]
    # Unique names are checked by the loader, which can point at the second occurrence's line.
    # Chains of the models above served as Triton ensembles (spec/pipelines.py); checked against the models
    # by the loader, which can point at each step.
    pipelines: Annotated[tuple[PipelineSpec, ...], Field(**LIST, max_length=10_000)] = ()

    def model(self, name: str) -> ClassicModelSpec | LlmModelSpec:
        return next(m for m in self.models if m.name == name)
