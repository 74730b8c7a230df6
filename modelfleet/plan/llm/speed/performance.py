"""How fast an LLM replica serves: prefill time and time per output token, from its shape (llm/speed/load.py turns them
into TTFT at peak, tokens/s and replicas).

A pure, fast model of one vLLM engine step (a few microseconds per estimate), so the compiler can price every
(instance type, tp, pp, ep, batch) candidate. A step runs the transformer once over ``m`` tokens: the new
prompt tokens of a prefill plus one token per running sequence. Per layer and per GPU it costs

- its GEMMs, each a roofline of its FLOPs and the bytes of its weights (the active experts' only, for MoE);
- attention: a prompt's causal FLOPs, and for decoding sequences the KV cache they read;
- element-wise kernels (norms, activations): bytes over memory bandwidth;
- tensor-parallel all-reduces (two per layer) and pipeline hand-offs.

Every efficiency and latency floor is a per-GPU constant in :class:`GpuPerformance`, fitted to measured
silicon data (NVIDIA AIConfigurator's per-op databases, see ``modelfleet calibrate``) where it exists, else
taken from the GPU's data sheet; the estimate's ``source`` says which.

How steps make TTFT and TPOT follows vLLM's V1 scheduler (one partial prefill per step, chunked into the
decode batch), as AIConfigurator's aggregated-serving model does:

- ``prefill_ms``: one prompt on an idle replica, plus vLLM's per-request CPU dispatch cost;
- ``tpot_ms`` with ``batch`` sequences in flight: a steady state where each sequence's prompt is prefilled in
  one step beside the other sequences' decode tokens, so per output token the replica also spends
  ``batch / output_tokens`` of a prefill. With more sequences than output tokens, only one prompt enters per
  step, so at most ``output_tokens`` sequences decode at once.
"""

from __future__ import annotations

import bisect
import functools
import math
from dataclasses import dataclass

from .steptime import Kind, Roof, StepTimer


@dataclass(kw_only=True, frozen=True)
class LlmShape:
    """What the speed depends on, as a model's config.json says (HF names in the comments)."""

    layers: int  # num_hidden_layers
    hidden: int  # hidden_size
    heads: int  # num_attention_heads
    kv_heads: int  # num_key_value_heads
    head_dim: int  # head_dim, else hidden_size / num_attention_heads
    intermediate: int  # intermediate_size: the dense MLP (and a MoE's leading dense layers)
    vocab: int  # vocab_size
    experts: int = 0  # n_routed_experts / num_local_experts / num_experts; 0 = dense
    experts_per_token: int = 0  # num_experts_per_tok
    moe_intermediate: int = 0  # moe_intermediate_size (else intermediate_size)
    shared_expert_intermediate: int = 0  # n_shared_experts x moe_intermediate_size, or shared_expert_intermediate_size
    dense_layers: int = 0  # first_k_dense_replace: leading layers with a dense MLP in a MoE
    kv_lora_rank: int = 0  # MLA: the compressed KV per token is kv_lora_rank + qk_rope_head_dim
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    qk_nope_head_dim: int = 0
    v_head_dim: int = 0
    sliding_window: int = 0  # tokens a windowed layer attends to; 0 = none
    sliding_window_layers: int = 0  # how many layers use the window (all, or every other one)
    weight_bytes: float = 2.0  # per parameter in GPU memory (bf16 2, fp8 1, int4 0.5)
    kv_bytes: float = 2.0  # per KV element
    tied_embeddings: bool = False
    # Weights of a byte or less run on FP8 tensor cores (fp8 checkpoints). False: weight-only quantization
    # (int8/int4 GPTQ, AWQ) that dequantizes to 16-bit, so it computes at the 16-bit peak.
    fp8_weights: bool = True

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers if self.is_moe else 0

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def v_dim(self) -> int:
        return self.v_head_dim if self.is_mla else self.head_dim

    def kv_elements_per_token_per_layer(self, tp: int = 1) -> int:
        """Cached elements per token and layer on one GPU. MLA caches one latent vector per token (kv_lora_rank
        + qk_rope_head_dim), which every tensor-parallel rank holds whole; GQA caches K and V of its KV heads."""
        if self.is_mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        return 2 * max(1, self.kv_heads // tp) * self.head_dim

    def kv_bytes_per_token(self) -> float:
        """KV cache of one token, whole model (one GPU's copy for MLA)."""
        return self.layers * self.kv_elements_per_token_per_layer() * self.kv_bytes

    def attention_params(self) -> int:
        h = self.hidden
        if not self.is_mla:
            return h * (self.heads + 2 * self.kv_heads) * self.head_dim + self.heads * self.head_dim * h
        q = (h * self.q_lora_rank + self.q_lora_rank * self.heads * self.qk_head_dim if self.q_lora_rank
             else h * self.heads * self.qk_head_dim)
        kv = h * (self.kv_lora_rank + self.qk_rope_head_dim) + self.kv_lora_rank * self.heads * (
            self.qk_nope_head_dim + self.v_head_dim)
        return q + kv + self.heads * self.v_head_dim * h

    def mlp_params(self, active: bool) -> tuple[int, int]:
        """(one dense layer's MLP, one MoE layer's MLP: router, routed experts (all, or the active ones), shared)."""
        dense = 3 * self.hidden * self.intermediate
        if not self.is_moe:
            return dense, 0
        experts = self.experts_per_token if active else self.experts
        moe = self.hidden * self.experts + 3 * self.hidden * (
            experts * self.moe_intermediate + self.shared_expert_intermediate)
        return dense, moe

    def params(self, active: bool = False) -> int:
        """Weights, counting every expert (``active=False``: what GPU memory holds) or only the experts a
        token uses (``active=True``: what one token's compute and a decode step's reads scale with)."""
        dense, moe = self.mlp_params(active)
        dense_layers = self.layers - self.moe_layers
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * self.attention_params() + dense_layers * dense + self.moe_layers * moe + embeddings


@dataclass(frozen=True)
class Roofline:
    """Time of a kernel that does ``flops`` and moves ``bytes``: the two bounds at fitted fractions of the
    GPU's peak, blended (p-norm with exponent ``sharpness``: large is a hard max, 1 a sum), plus a floor."""

    compute_efficiency: float
    memory_efficiency: float
    floor_us: float
    sharpness: float = 4.0

    def time_us(self, flops: float, nbytes: float, tflops: float, gbs: float) -> float:
        compute = flops / (tflops * 1e6 * self.compute_efficiency)
        memory = nbytes / (gbs * 1e3 * self.memory_efficiency)
        p = self.sharpness
        return (compute**p + memory**p) ** (1.0 / p) + self.floor_us


@dataclass(kw_only=True, frozen=True)
class GpuPerformance:
    """One GPU's speed constants. ``tflops`` is dense BF16 tensor peak, ``fp8_tflops`` FP8 (0: none)."""

    key: str
    tflops: float
    fp8_tflops: float
    memory_gbs: float
    gemm: Roofline
    gemm_fp8: Roofline | None  # FP8 weights and activations (None: the BF16 fit at the FP8 peak)
    context_attention: Roofline
    decode_attention: Roofline
    moe: Roofline
    elementwise: Roofline
    # Measured all-reduce time: ((GPUs, ((elements, microseconds), ...) ascending), ...).
    allreduce_us: tuple[tuple[int, tuple[tuple[int, float], ...]], ...]
    p2p_gbs: float  # pipeline stages on different nodes: per-GPU network bandwidth
    p2p_latency_us: float
    prefill_dispatch_ms_per_layer: float  # vLLM's CPU-side cost of scheduling one prompt, per layer
    step_overhead_us: float  # per engine step (sampling, scheduling)
    mla_layer_floor_us: float  # MLA attention runs a dozen small kernels per layer: their fixed cost
    moe_expert_us: float  # the fused MoE kernel's fixed cost per expert it runs (weighs on many small experts)
    source: str
    # Expert parallelism runs vLLM's fused-MoE kernel on a permuted local batch through an expert map, which
    # AIConfigurator measures apart from the tensor-parallel kernel (on A100, vLLM 0.14, at well below its
    # bandwidth): its efficiency relative to the tensor-parallel kernel's, fitted on expert-parallel points.
    moe_ep_efficiency: float = 1.0

    def allreduce_time_us(self, tp: int, elements: float) -> float:
        """Log-log interpolation in the measured curve; beyond its ends, scaled linearly with size."""
        if tp <= 1 or elements <= 0 or not self.allreduce_us:  # no curve: an ideal, free interconnect
            return 0.0
        curve = min(self.allreduce_us, key=lambda entry: (abs(entry[0] - tp), entry[0]))[1]
        sizes = [size for size, _ in curve]
        i = bisect.bisect_left(sizes, elements)
        if i == 0:
            return curve[0][1]
        if i == len(curve):
            return curve[-1][1] * elements / curve[-1][0]
        (s0, t0), (s1, t1) = curve[i - 1], curve[i]
        w = math.log(elements / s0) / math.log(s1 / s0)
        return math.exp(math.log(t0) + w * (math.log(t1) - math.log(t0)))


@dataclass(frozen=True)
class Layout:
    """How one replica is split: tensor parallel ``tp`` GPUs per stage, ``pp`` pipeline stages, and the
    experts spread over the ``tp`` GPUs (``expert_parallel``, vLLM's --enable-expert-parallel) rather than
    each expert's matrices split across them."""

    tp: int = 1
    pp: int = 1
    expert_parallel: bool = False


@dataclass(frozen=True)
class Step:
    """One engine step: ``prompt_tokens`` new tokens of one prompt whose context ends at ``prompt_context``,
    and ``decoding`` sequences adding one token each to a context of ``decode_context`` tokens."""

    prompt_tokens: int = 0
    prompt_context: int = 0
    decoding: int = 0
    decode_context: int = 0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.decoding


def shape_from_fields(fields: dict, weight_bytes: float = 2.0, kv_bytes: float = 2.0) -> LlmShape:
    """An LlmShape from ``modelfleet.spec.hf_config.shape_fields`` (extra figures such as the context length
    are ignored)."""
    names = LlmShape.__dataclass_fields__
    return LlmShape(**{k: v for k, v in fields.items() if k in names}, weight_bytes=weight_bytes, kv_bytes=kv_bytes)


def _gemm_us(gpu: GpuPerformance, shape: LlmShape, m: int, n: float, k: float, weight_bytes: float | None = None):
    wb = shape.weight_bytes if weight_bytes is None else weight_bytes
    fp8 = wb <= 1 and shape.fp8_weights and gpu.fp8_tflops > 0
    roofline = gpu.gemm_fp8 if fp8 and gpu.gemm_fp8 else gpu.gemm
    flops = 2.0 * m * n * k
    nbytes = n * k * wb + 2.0 * m * (n + k)
    return roofline.time_us(flops, nbytes, gpu.fp8_tflops if fp8 else gpu.tflops, gpu.memory_gbs)


def _attention_gemms_us(gpu: GpuPerformance, shape: LlmShape, m: int, tp: int) -> float:
    h = shape.hidden
    if not shape.is_mla:
        qkv = shape.heads * shape.head_dim / tp + 2 * max(1, shape.kv_heads // tp) * shape.head_dim
        return _gemm_us(gpu, shape, m, qkv, h) + _gemm_us(gpu, shape, m, h, shape.heads * shape.head_dim / tp)
    heads = shape.heads / tp
    # vLLM keeps the down-projections (q_a, kv_a) whole on every rank and splits the up-projections by head.
    down = (shape.q_lora_rank or 0) + shape.kv_lora_rank + shape.qk_rope_head_dim
    q_up = _gemm_us(gpu, shape, m, heads * shape.qk_head_dim, shape.q_lora_rank) if shape.q_lora_rank else (
        _gemm_us(gpu, shape, m, heads * shape.qk_head_dim, h))
    kv_up = _gemm_us(gpu, shape, m, heads * (shape.qk_nope_head_dim + shape.v_head_dim), shape.kv_lora_rank)
    return (_gemm_us(gpu, shape, m, down, h) + q_up + kv_up
            + _gemm_us(gpu, shape, m, h, heads * shape.v_head_dim) + gpu.mla_layer_floor_us)


def _mlp_us(gpu: GpuPerformance, shape: LlmShape, m: int, intermediate: float, tp: int) -> float:
    if intermediate <= 0:
        return 0.0
    return _gemm_us(gpu, shape, m, 2 * intermediate / tp, shape.hidden) + _gemm_us(
        gpu, shape, m, shape.hidden, intermediate / tp)


# Expert popularity: real routers favour some experts; AIConfigurator measures and models MoE kernels with
# a power law of this exponent over the experts (its default for MoE families other than DeepSeek's).
EXPERT_POPULARITY_EXPONENT = 1.2


@functools.lru_cache(maxsize=256)
def _expert_popularity(experts: int) -> tuple[float, ...]:
    weights = [rank ** -EXPERT_POPULARITY_EXPONENT for rank in range(1, experts + 1)]
    total = sum(weights)
    return tuple(w / total for w in weights)


def _busiest_gpu_experts(shape: LlmShape, assignments: float, layout: Layout) -> tuple[float, float]:
    """(experts hit, token assignments) on the busiest GPU. Without expert parallelism every GPU holds a slice
    of every expert and sees every assignment; with it, experts are dealt out by popularity rank (rank r to GPU
    r mod tp), so GPU 0 holds the most popular one and waits on nobody."""
    popularity = _expert_popularity(shape.experts)
    mine = popularity[::layout.tp] if layout.expert_parallel else popularity
    hit = sum(1.0 - (1.0 - p) ** assignments for p in mine)
    return hit, assignments * sum(mine)


def _experts_us(gpu: GpuPerformance, shape: LlmShape, m: int, layout: Layout) -> float:
    """Routed experts on the busiest GPU: the experts its tokens hit, each a pair of GEMMs over the tokens
    routed to it (big experts run like dense GEMMs, many small ones far below peak: ``gpu.moe`` scales the
    GEMM roofline's efficiencies for the fused MoE kernel), plus the router."""
    split = 1 if layout.expert_parallel else layout.tp
    inner = shape.moe_intermediate / split
    hit, assignments = _busiest_gpu_experts(shape, m * shape.experts_per_token, layout)
    rows = assignments / hit if hit else 0.0
    flops = hit * 2.0 * rows * 3 * shape.hidden * inner
    nbytes = hit * (3 * shape.hidden * inner * shape.weight_bytes + 2.0 * rows * (2 * shape.hidden + 3 * inner))
    fp8 = shape.weight_bytes <= 1 and shape.fp8_weights and gpu.fp8_tflops > 0
    gemm = gpu.gemm_fp8 if fp8 and gpu.gemm_fp8 else gpu.gemm
    ep = gpu.moe_ep_efficiency if layout.expert_parallel else 1.0
    kernel = Roofline(gemm.compute_efficiency * gpu.moe.compute_efficiency * ep,
                      gemm.memory_efficiency * gpu.moe.memory_efficiency * ep, gpu.moe.floor_us, gemm.sharpness)
    router = _gemm_us(gpu, shape, m, shape.experts, shape.hidden, weight_bytes=2.0)
    kernel_us = kernel.time_us(flops, nbytes, gpu.fp8_tflops if fp8 else gpu.tflops, gpu.memory_gbs)
    return kernel_us + hit * gpu.moe_expert_us + router


@dataclass(frozen=True)
class _Attention:
    """One layer kind's attention on one GPU, as coefficients of a step's tokens and contexts."""

    pair_flops: float  # per (query, cached token) pair of a prompt
    prompt_bytes: float  # per prompt token: its queries, keys and values in, its outputs out
    cached_flops: float  # per cached token a decoding sequence reads (MLA: scored in the latent space)
    cached_bytes: float
    window: float  # the most tokens one query attends to (inf: all)


@functools.lru_cache(maxsize=4096)
def _attention_of(shape: LlmShape, tp: int, windowed: bool) -> _Attention:
    heads = shape.heads / tp
    per_pair = 2.0 * heads * (shape.qk_head_dim + shape.v_dim)  # FLOPs per (query, cached token) pair
    kv = shape.kv_elements_per_token_per_layer(tp)
    # MLA decodes in the latent space: each head scores kv_lora_rank + rope and reads back kv_lora_rank.
    cached = 2.0 * heads * (2 * shape.kv_lora_rank + shape.qk_rope_head_dim) if shape.is_mla else per_pair
    return _Attention(pair_flops=per_pair, prompt_bytes=2.0 * (heads * shape.qk_head_dim * 2 + kv),
                      cached_flops=cached, cached_bytes=kv * shape.kv_bytes,
                      window=shape.sliding_window if windowed else math.inf)


def _attention_us(gpu: GpuPerformance, a: _Attention, prompt_tokens: int, prompt_context: float, decoding: int,
                  decode_context: float) -> float:
    time = 0.0
    if prompt_tokens:
        span = min(prompt_context - prompt_tokens / 2.0, a.window)  # causal: a query sees half its chunk
        time += gpu.context_attention.time_us(a.pair_flops * prompt_tokens * span, a.prompt_bytes * prompt_tokens,
                                              gpu.tflops, gpu.memory_gbs)
    if decoding:
        cached = decoding * min(decode_context, a.window)
        time += gpu.decode_attention.time_us(cached * a.cached_flops, cached * a.cached_bytes, gpu.tflops,
                                             gpu.memory_gbs)
    return time


def _elementwise_us(gpu: GpuPerformance, elements: float) -> float:
    return gpu.elementwise.time_us(0.0, 2.0 * elements, gpu.tflops, gpu.memory_gbs)


def _dense_layer_us(gpu: GpuPerformance, shape: LlmShape, m: int, layout: Layout, moe: bool) -> float:
    """A layer's work that depends only on the step's ``m`` tokens: GEMMs, element-wise kernels, all-reduces."""
    tp, h = layout.tp, shape.hidden
    time = _attention_gemms_us(gpu, shape, m, tp)
    time += 2 * _elementwise_us(gpu, m * 4 * h)  # residual add + RMSNorm, twice
    if moe:
        time += _experts_us(gpu, shape, m, layout) + _mlp_us(gpu, shape, m, shape.shared_expert_intermediate, tp)
        inner = shape.shared_expert_intermediate / tp
    else:
        time += _mlp_us(gpu, shape, m, shape.intermediate, tp)
        inner = shape.intermediate / tp
    time += _elementwise_us(gpu, m * 3 * inner)  # SiLU x gate
    return time + 2 * gpu.allreduce_time_us(tp, m * h)


def _tokens_us(gpu: GpuPerformance, shape: LlmShape, layout: Layout, m: int) -> float:
    """Everything of a step of ``m`` tokens but attention and the LM head: every layer's dense work, the
    embedding, pipeline hand-offs and the step's fixed overhead."""
    layers = sum(count * _dense_layer_us(gpu, shape, m, layout, moe) for (moe, _), count in _layer_kinds(shape))
    embed = _elementwise_us(gpu, m * shape.hidden) + gpu.allreduce_time_us(layout.tp, m * shape.hidden)
    hops = (layout.pp - 1) * (gpu.p2p_latency_us + m * shape.hidden * 2.0 / (gpu.p2p_gbs * 1e3))
    return layers + embed + hops + gpu.step_overhead_us


def _head_us(gpu: GpuPerformance, shape: LlmShape, layout: Layout, logits: int) -> float:
    """The LM head over the ``logits`` tokens that sample (one per decoding sequence, one for a prompt chunk)."""
    return _gemm_us(gpu, shape, logits, shape.vocab / layout.tp, shape.hidden, weight_bytes=2.0)


def _attention_kinds(shape: LlmShape, layout: Layout) -> tuple[tuple[float, _Attention], ...]:
    """(layers, their attention) per layer kind."""
    return tuple((count, _attention_of(shape, layout.tp, windowed)) for (_, windowed), count in _layer_kinds(shape))


def _attention_layers_us(gpu: GpuPerformance, kinds: tuple[tuple[float, _Attention], ...], step: Step) -> float:
    return sum(count * _attention_us(gpu, a, step.prompt_tokens, step.prompt_context, step.decoding,
                                     step.decode_context) for count, a in kinds)


def step_ms(gpu: GpuPerformance, shape: LlmShape, layout: Layout, step: Step) -> float:
    """One engine step through every layer (all pipeline stages, which a step crosses one after another):
    the parts that depend on its token count, the LM head over the tokens that sample, and attention."""
    if step.tokens <= 0:
        return 0.0
    logits = step.decoding + (1 if step.prompt_tokens else 0)
    return (_tokens_us(gpu, shape, layout, step.tokens) + _head_us(gpu, shape, layout, logits)
            + _attention_layers_us(gpu, _attention_kinds(shape, layout), step)) / 1000.0


def step_timer(gpu: GpuPerformance, shape: LlmShape, layout: Layout, *, dispatch_ms: float = 0.0,
               prefill: float = 1.0, tpot: float = 1.0) -> StepTimer:
    """``step_ms`` of one layout as the simulator calls it, ``(prompt tokens, their context, decoding sequences,
    their mean context) -> ms`` (steptime.StepTimer, compiled with the simulation): exactly the same sum, made
    cheap by memoising its parts that depend only on a count (the dense work of ``m`` tokens, most of a step's
    cost; the LM head over the sampled tokens), while attention, a few rooflines per layer kind, is computed for
    each step at its own contexts. ``dispatch_ms`` is added to a step with a prompt, then ``prefill`` (with a
    prompt) or ``tpot`` (without) multiplies it: a measured profile's corrections."""
    kinds = [Kind(count=count, pair_flops=a.pair_flops, prompt_bytes=a.prompt_bytes, cached_flops=a.cached_flops,
                  cached_bytes=a.cached_bytes, window=a.window) for count, a in _attention_kinds(shape, layout)]

    def roof(r: Roofline) -> Roof:
        return Roof(compute_efficiency=r.compute_efficiency, memory_efficiency=r.memory_efficiency,
                    floor_us=r.floor_us, sharpness=r.sharpness, tflops=gpu.tflops, gbs=gpu.memory_gbs)
    return StepTimer(dense=functools.partial(_tokens_us, gpu, shape, layout),
                     head=functools.partial(_head_us, gpu, shape, layout), kinds=kinds,
                     context=roof(gpu.context_attention), decode=roof(gpu.decode_attention), dispatch=dispatch_ms,
                     prefill=prefill, tpot=tpot)


@functools.lru_cache(maxsize=1024)
def _layer_kinds(shape: LlmShape) -> tuple[tuple[tuple[bool, bool], float], ...]:
    """(moe, windowed) -> how many layers; windowed layers are spread evenly, so each kind keeps its share."""
    windowed_share = shape.sliding_window_layers / shape.layers if shape.sliding_window else 0.0
    kinds = []
    for moe, count in ((False, shape.layers - shape.moe_layers), (True, shape.moe_layers)):
        for windowed, share in ((True, windowed_share), (False, 1.0 - windowed_share)):
            if count * share > 0:
                kinds.append(((moe, windowed), count * share))
    return tuple(kinds)


def prefill_ms(gpu: GpuPerformance, shape: LlmShape, layout: Layout, input_tokens: int) -> float:
    """One prompt on an idle replica: one step over the whole prompt, plus vLLM's per-request dispatch."""
    step = Step(prompt_tokens=input_tokens, prompt_context=input_tokens)
    return step_ms(gpu, shape, layout, step) + gpu.prefill_dispatch_ms_per_layer * shape.layers


def tpot_ms(gpu: GpuPerformance, shape: LlmShape, layout: Layout, batch: int, input_tokens: int,
            output_tokens: int) -> float:
    """Time per output token with ``batch`` sequences in flight, in steady state (see the module docstring)."""
    context = input_tokens + output_tokens // 2
    decode = step_ms(gpu, shape, layout, Step(decoding=batch, decode_context=context))
    if batch <= 1 or output_tokens <= 1:
        return decode
    running = min(batch - 1, output_tokens)
    mixed = step_ms(gpu, shape, layout, Step(input_tokens, input_tokens, running, context))
    if batch >= output_tokens:
        return mixed
    return (batch * mixed + (output_tokens - batch) * decode) / output_tokens
