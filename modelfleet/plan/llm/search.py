"""Placing one LLM: instance type, tensor/pipeline/expert parallelism, max_num_seqs, max_num_batched_tokens and
replicas, chosen by the whole SLA at peak load.

Every (instance type, tp) on one node that the environment allows is sized for memory (weights, LoRA buffers,
one full context of KV cache); a MoE model's layouts with tp > 1 are sized with and without expert
parallelism. Each that fits is then fitted to the SLA (llm_fit: TTFT with queueing and TPOT at the batch,
which set max_num_seqs and the replicas), cheapest first: a layout whose cost at its availability floor
alone exceeds the best found is not timed (its lower bound is reported). Pipeline parallelism across nodes
is sized only when no allowed single node serves the model: a model split over nodes pays cross-node latency
and a larger blast radius. Candidates are priced at the nodes the node group will really have: the GPUs their
pods take, and at least one node per zone the availability floor spreads replicas over; each node at the
price every placement is ranked by (hardware/node_price.py: the stack's capacity type, spot included, with
its root volume; a reserved node's instance-hour is paid already).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ...errors import Issue
from ...spec.environment import EnvironmentSpec
from ...spec.load import with_fields
from ...spec.models import LlmModelSpec
from ...spec.units import GIB
from ..hardware.instances import GpuType, InstanceCatalogue, InstanceType
from .fit import first_guess, fit_layout
from .infeasible import explain_infeasible
from .shape import kv_bytes_per_sequence, llm_weights_gib, lora_gib_per_gpu, model_shape
from .speed.load import Demand, Miss, Speed, SpeedCorrection, largest, p99_wait_ms, prompt_chunk, speed_of
from .speed.peak import seed_of, traffic_of
from .verify import MAX_REPLICAS
from ..capacity.reservations import reserved_count
from ..hardware.node_price import ranking_usd_per_hour
from .speed.performance import Layout, LlmShape
from .speed.calibration import gpu_for
from .precision import Precision, precision_on, unsupported, weights_changes
from ..rejection import CONTEXT, MEMORY, PRECISION, TPOT, TTFT, Rejection, closeness
from ..sizing import (LLM_RUNTIME_OVERHEAD_GIB_PER_GPU, MAX_PIPELINE_STAGES, nodes_for_pods, on_demand_replicas, replica_floor,
                      tensor_parallel_ok)
from .candidate import LlmCandidate, Outcome, Sized
from .explain import decision_for, override_problem

TP_SIZES = (1, 2, 4, 8)


def demand_of(model: LlmModelSpec, env: EnvironmentSpec) -> Demand:
    sla, policy = model.sla, env.replicas
    load, amount = next((kind, float(value)) for kind, value in (
        ("sequences", sla.peak_concurrent_sequences), ("output_tokens_per_s", sla.peak_output_tokens_per_s),
        ("requests_per_s", sla.peak_requests_per_s)) if value is not None)
    floor = replica_floor(env, sla.availability)
    pinned = 1 if policy.single_replica else model.overrides.replicas
    traffic = traffic_of(sla)
    return Demand(input_tokens=sla.input_tokens(), output_tokens=sla.output_tokens(),
                  max_prompt_tokens=sla.max_context_tokens - sla.output_tokens(), ttft_ms=sla.p99_ttft_ms,
                  tpot_ms=sla.p99_tpot_ms, load=load, amount=amount, floor=floor, seqs_cap=env.vllm.max_num_seqs_cap,
                  pinned_seqs=model.overrides.max_num_seqs, pinned_replicas=pinned,
                  batched_tokens=model.overrides.max_num_batched_tokens,
                  pinned_by="single replica" if policy.single_replica else "overrides.replicas",
                  traffic=traffic, seed=seed_of(traffic))


def replica_bounds(model: LlmModelSpec, env: EnvironmentSpec, desired: int) -> tuple[int, int, int]:
    """(min, desired, max) replicas: the availability floor, the peak, the environment's scale-out policy."""
    policy = env.replicas
    if policy.single_replica:
        return 1, 1, 1
    floor = replica_floor(env, model.sla.availability)
    # A pin below the availability floor is the user's call; min must not exceed it (as for Triton servers).
    return min(floor, desired), desired, max(desired, math.ceil(desired * policy.max_scale_factor))


def nodes_for_replicas(instance: InstanceType, tp: int, pp: int, min_replicas: int, replicas: int) -> int:
    """Nodes ``replicas`` take, as the node group is sized (compiler._node_groups): their pods of ``tp``
    GPUs packed onto nodes, and at least one node per zone the ``min_replicas`` spread over."""
    spread = min_replicas * pp if min_replicas >= 2 else 0
    return max(nodes_for_pods({tp: replicas * pp}, instance.gpus), spread)


def nodes_usd(catalogue: InstanceCatalogue, env: EnvironmentSpec, instance: InstanceType, tp: int, pp: int,
              min_replicas: int, replicas: int) -> float:
    """USD per hour of the nodes ``replicas`` take (nodes_for_replicas) at the ranking price, as the cost preview
    charges them (hardware/node_price.py): reserved nodes' instance-hours paid already, and on a spot stack a
    floor of two or more replicas (spread over zones) on on-demand nodes (capacity/provisioning.py)."""
    nodes = nodes_for_replicas(instance, tp, pp, min_replicas, replicas)
    held = on_demand_replicas(env, min_replicas)
    base = nodes_for_pods({tp: held * pp}, instance.gpus) if held else 0
    return ranking_usd_per_hour(catalogue, instance, env, nodes, reserved=reserved_count(env, instance.name),
                                on_demand_base=base)


@dataclass(kw_only=True, frozen=True)
class _Memory:
    """What one replica holds on a GPU model at (tp, pp): the same on every instance type of that GPU."""

    precision: Precision
    shape: LlmShape
    seqs: int = 0  # sequences of the average context the KV cache holds
    kv_tokens: int = 0
    kv_gib: float = 0.0  # per replica, all GPUs
    lora: float = 0.0  # GiB per GPU
    problem: tuple[str, int, float] | None = None  # (reason, rejection stage, figure) when it does not fit


def gpu_memory(model: LlmModelSpec, env: EnvironmentSpec, gpu: GpuType, tp: int, pp: int) -> _Memory:
    """Weights, LoRA buffers and one full context of KV cache within the budget of each GPU."""
    precision = precision_on(model, gpu, model.image or env.vllm.image)
    util = model.overrides.gpu_memory_utilization or env.vllm.gpu_memory_utilization
    budget = gpu.memory_gib * util - LLM_RUNTIME_OVERHEAD_GIB_PER_GPU
    shape = model_shape(model, precision)
    weights = llm_weights_gib(model) / (tp * pp)
    lora = lora_gib_per_gpu(model, shape, tp, pp)
    if (weights + lora) * precision.load_factor >= budget:
        return _Memory(precision=precision, shape=shape,
                       problem=(_memory_reason(weights, lora, precision, budget), MEMORY, budget * tp * pp))
    free = (budget - weights - lora) * GIB
    context, average = model.sla.max_context_tokens, model.sla.context_tokens()
    if kv_bytes_per_sequence(shape, context, tp, pp) > free:
        tokens = int(free / kv_bytes_per_sequence(shape, 1, tp, pp))
        return _Memory(precision=precision, shape=shape,
                       problem=(f"KV cache holds {tokens} tokens, less than one {context}-token context",
                                CONTEXT, tokens))
    per_sequence = kv_bytes_per_sequence(shape, average, tp, pp)
    return _Memory(precision=precision, shape=shape, seqs=int(free // per_sequence),
                   kv_tokens=int(free / per_sequence * average), kv_gib=(budget - weights - lora) * tp * pp, lora=lora)


def size_layout(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue, instance: InstanceType,
                tp: int, pp: int, ep: bool, demand: Demand, memo: dict | None = None) -> Sized | Rejection:
    """Memory and context for one layout (gpu_memory, shared by the instance types of a GPU through ``memo``),
    and its cost at the replica floor."""
    label = f"{instance.name} tp={tp} pp={pp}" + (" ep" if ep else "")
    key = (instance.gpu, tp, pp)
    memory = memo.get(key) if memo is not None else None
    if memory is None:
        memory = gpu_memory(model, env, instance.gpu, tp, pp)
        if memo is not None:
            memo[key] = memory
    if memory.problem is not None:
        return Rejection(label, *memory.problem)
    lo, floor, _ = replica_bounds(model, env, demand.pinned_replicas or demand.floor)
    # reserved nodes are already paid: only the nodes beyond a reservation of the type are billed
    floor_usd = nodes_usd(catalogue, env, instance, tp, pp, lo, floor)
    return Sized(instance=instance, tp=tp, pp=pp, expert_parallel=ep, precision=memory.precision, shape=memory.shape,
                 kv_seqs=memory.seqs, kv_tokens=memory.kv_tokens, kv_gib=memory.kv_gib, lora_gib=memory.lora,
                 floor_usd=floor_usd)


def _memory_reason(weights: float, lora: float, precision: Precision, budget: float) -> str:
    adapters = f" and {lora:.1f} GiB of LoRA buffers" if lora else ""
    if weights + lora < budget:  # fits once quantized, not while the 16-bit checkpoint loads
        return (f"loading the 16-bit checkpoint to quantize it takes {weights * precision.load_factor:.1f} GiB per "
                f"GPU, more than the {budget:.1f} GiB budget (this vLLM release quantizes after loading)")
    return f"weights {weights:.1f} GiB per GPU{adapters} exceed the {budget:.1f} GiB budget"


def measured_correction(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue
                        ) -> SpeedCorrection | None:
    """Where a measured profile corrects the prediction: the factors on prompt and decode times that make the
    model reproduce the measurement at its own point (GPU, tp, shape, sequences in flight), which every layout
    then carries, with the profile as its source (llm_speed.SpeedCorrection). On another GPU the factors are
    assumed to hold: what they correct, the engine's release and kernels against the calibration's, is not
    the GPU's. None: no profile measured on a GPU (a CPU run of the tiny model says nothing about one).

    Decode: measured median TPOT / predicted TPOT with ``concurrency`` sequences running. Prompts: the factor
    whose predicted p99 TTFT at the measured load (closed loop: ``concurrency`` sequences, each request
    followed by the next, so prompts arrive at the rate Little's law gives; the benchmark's prompts are all of
    one length) equals the measured p99, found by bisection (the p99 grows with the factor)."""
    profile = model.profile
    gpu = next((i.gpu for i in catalogue.instances.values() if i.gpu.key == profile.measured_on), None)
    if not profile.measured or gpu is None:
        return None
    shape = model_shape(model, precision_on(model, gpu, model.image or env.vllm.image))
    layout, c = Layout(profile.tensor_parallel or 1, 1, False), profile.concurrency
    chunk = prompt_chunk(profile.input_tokens)

    def predicted(prefill: float, tpot: float) -> Speed:
        return Speed(gpu_for(gpu), shape, layout, profile.input_tokens, profile.output_tokens,
                     SpeedCorrection(prefill, tpot))
    base = predicted(1.0, 1.0)
    tpot = profile.tpot_median_ms / base.tpot(c)

    def ttft_p99(factor: float) -> float:
        speed = predicted(factor, tpot)
        service = speed.service(c, chunk)
        return service + p99_wait_ms(service, speed.rate(c, chunk), 0.0)
    low, high = 0.01, 100.0
    for _ in range(50):
        mid = math.sqrt(low * high)
        low, high = (mid, high) if ttft_p99(mid) < profile.ttft_p99_ms else (low, mid)
    prefill, tpot = round(math.sqrt(low * high), 3), round(tpot, 3)
    return SpeedCorrection(prefill=prefill, tpot=tpot, source=(
        f"measured profile ({profile.measured_on} tp={profile.tensor_parallel}, {profile.measured_at}, {c} in "
        f"flight): prompts x{prefill:.2f}, decode x{tpot:.2f} of the prediction ({gpu_for(gpu).source})"))


def time_layout(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue, sized: Sized, demand: Demand,
                correction: SpeedCorrection | None = None, best_usd: float = math.inf) -> Outcome:
    """Fit a sized layout to the SLA at peak (llm_fit): a priced candidate, or why no replica count serves.
    ``correction``: a measured profile's ratios (measured_correction), else the calibrated prediction.
    ``best_usd``: the cheapest candidate verified so far; a layout that would need more replicas than cost
    less is returned as it came (Sized: not simulated further)."""
    most = _most_replicas(model, env, catalogue, sized, best_usd)
    gpu = gpu_for(sized.instance.gpu)
    speed = speed_of(gpu, sized.shape, Layout(sized.tp, sized.pp, sized.expert_parallel), demand.input_tokens,
                     demand.output_tokens, correction)
    fit = fit_layout(speed, demand, sized.kv_seqs, sized.kv_tokens, most)
    if fit is None:  # needs more than `most` replicas: at least the cost of one more than that
        needs = (most or 0) + 1
        return replace(sized, floor_usd=_cost(model, env, catalogue, sized, needs),
                       bound=f"with the {needs}+ replicas it needs")
    if isinstance(fit, Miss):
        return Rejection(sized.label, f"{fit.reason} ({speed.source})", TTFT if fit.stage == "ttft" else TPOT,
                         fit.figure_ms)
    lo, desired, _ = replica_bounds(model, env, fit.replicas)
    nodes = nodes_for_replicas(sized.instance, sized.tp, sized.pp, lo, desired)
    return LlmCandidate(sized=sized, fit=fit, min_replicas=lo, nodes=nodes,
                        usd_per_hour=nodes_usd(catalogue, env, sized.instance, sized.tp, sized.pp, lo, desired),
                        source=speed.source)


def _most_replicas(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue, sized: Sized,
                   best_usd: float) -> int | None:
    """The most replicas of ``sized`` that still cost no more than ``best_usd`` (None: no bound)."""
    if best_usd == math.inf:
        return None
    if _cost(model, env, catalogue, sized, 1) > best_usd * (1 + 1e-9):
        return 0
    return largest(1, MAX_REPLICAS, lambda r: _cost(model, env, catalogue, sized, r) <= best_usd * (1 + 1e-9))


def layouts(model: LlmModelSpec, instance: InstanceType, multi_node: bool) -> list[tuple[int, int, bool]]:
    """(tp, pp, expert parallel) to size: on one node any tp that fits the heads; across nodes whole nodes
    only (tp = GPUs per node, pp = nodes); a MoE model with tp > 1 with and without expert parallelism."""
    arch = model.resolved_architecture()
    tps = [t for t in TP_SIZES if t <= instance.gpus and tensor_parallel_ok(arch, t)]
    if model.overrides.tensor_parallel_size:
        tps = [t for t in tps if t == model.overrides.tensor_parallel_size]
    pinned = model.overrides.pipeline_parallel_size
    if not multi_node:
        pairs = [(t, 1) for t in tps] if pinned in (None, 1) else []
    else:
        stages = [pinned] if pinned else list(range(2, MAX_PIPELINE_STAGES + 1))
        pairs = [(t, p) for p in stages if p > 1 for t in tps if t == instance.gpus]
    eps = [model.overrides.expert_parallel] if model.overrides.expert_parallel is not None else [False, True]
    return [(t, p, ep) for t, p in pairs for ep in (eps if arch.is_moe and t * p > 1 else [False])]


# At most this many layouts are simulated per search, in the closed form's order (likeliest winner first): the
# rest are left untimed, so a model allowed many instance types stays seconds to plan. A model none of these
# serves is refused with their reasons (pin overrides.instance_type to have another one simulated).
MAX_TIMED_LAYOUTS = 16


def search(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue, instances: tuple[InstanceType, ...],
           multi_node: bool,
           prune: bool = True, correction: SpeedCorrection | None = None,
           bound_usd: float = math.inf) -> dict[str, list[Outcome]]:
    """Every layout's outcome, by instance type: sized for memory, then timed cheapest floor first.
    ``bound_usd``: only layouts that may cost at most this (USD/h at the ranking price) are simulated, and each
    only up to the replicas that cost no more (may_serve_within); the rest are left untimed."""
    demand, found = demand_of(model, env), {i.name: [] for i in instances}
    waiting: list[Sized] = []
    memo: dict = {}
    for instance in instances:
        problem = unsupported(model, instance.gpu)
        if problem:
            found[instance.name].append(Rejection(instance.name, problem, PRECISION))
            continue
        for tp, pp, ep in layouts(model, instance, multi_node):
            result = size_layout(model, env, catalogue, instance, tp, pp, ep, demand, memo)
            (waiting if isinstance(result, Sized) else found[instance.name]).append(result)
    best, ranked = bound_usd, []
    for sized in waiting:
        guessed = _guessed(model, env, catalogue, sized, demand, correction)
        (ranked if isinstance(guessed, tuple) else found[sized.instance.name]).append(guessed)
    timed = 0
    for guess_usd, sized in sorted(ranked, key=lambda g: (g[0], g[1].floor_usd, g[1].instance.gpus * g[1].pp,
                                                           g[1].instance.name, g[1].tp, g[1].expert_parallel)):
        if prune and (sized.floor_usd > best * (1 + 1e-9) or timed >= MAX_TIMED_LAYOUTS):
            found[sized.instance.name].append(sized)  # untimed: it cannot beat the best, or the search is done
            continue
        timed += 1
        result = time_layout(model, env, catalogue, sized, demand, correction, best if prune else math.inf)
        found[sized.instance.name].append(result)
        if isinstance(result, LlmCandidate):
            best = min(best, result.usd_per_hour)
    return found


def _guessed(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue, sized: Sized, demand: Demand,
             correction: SpeedCorrection | None) -> tuple[float, Sized] | Rejection:
    """A sized layout with the closed form's cost (the order layouts are simulated in, likeliest winner first)
    and its floor raised to the replicas it needs at least; or why no replica count serves it."""
    speed = speed_of(gpu_for(sized.instance.gpu), sized.shape, Layout(sized.tp, sized.pp, sized.expert_parallel),
                     demand.input_tokens, demand.output_tokens, correction)
    guess = first_guess(speed, demand, sized.kv_seqs)
    if isinstance(guess, Miss):
        return Rejection(sized.label, f"{guess.reason} ({speed.source})", TTFT if guess.stage == "ttft" else TPOT,
                         guess.figure_ms)
    if demand.pinned_replicas is None and guess.least > demand.floor:
        sized = replace(sized, floor_usd=_cost(model, env, catalogue, sized, guess.least),
                        bound=f"with the {guess.least}+ replicas its throughput needs")
    return _cost(model, env, catalogue, sized, demand.pinned_replicas or guess.replicas), sized


def _cost(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue, sized: Sized, replicas: int) -> float:
    lo, desired, _ = replica_bounds(model, env, replicas)
    return nodes_usd(catalogue, env, sized.instance, sized.tp, sized.pp, lo, desired)


def best_of(outcomes: list[Outcome]) -> Outcome | None:
    """An instance type's showing: its cheapest candidate, else an untimed layout, else its closest miss."""
    fits = [o for o in outcomes if isinstance(o, LlmCandidate)]
    if fits:
        # equal cost: the faster stream, then the faster first token
        return min(fits, key=lambda c: (c.usd_per_hour, round(c.fit.tpot_ms, 1), round(c.fit.ttft_p99_ms), c.tp,
                                        c.expert_parallel))
    untimed = [o for o in outcomes if isinstance(o, Sized)]
    if untimed:
        return min(untimed, key=lambda s: s.floor_usd)
    misses = [o for o in outcomes if isinstance(o, Rejection)]
    return max(misses, key=closeness) if misses else None


def choose_llm_layout(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                      index: int) -> tuple[LlmCandidate, Decision, dict[str, list[Outcome]]] | Issue:
    problem = override_problem(model, env, catalogue, index, allowed_instances(model, env, catalogue))
    if problem is not None:
        return problem
    instances = allowed_instances(model, env, catalogue)
    correction = measured_correction(model, env, catalogue)
    found = search(model, env, catalogue, instances, multi_node=False, correction=correction)
    single_node = any(isinstance(o, LlmCandidate) for outs in found.values() for o in outs)
    if not single_node:
        found = {name: outs + more for (name, outs), more in zip(found.items(), search(
            model, env, catalogue, instances, multi_node=True, correction=correction).values())}
    shown = {name: best_of(outs) for name, outs in found.items()}
    fits = sorted((o for o in shown.values() if isinstance(o, LlmCandidate)),
                  key=lambda c: (c.usd_per_hour, c.instance.gpus * c.pp, c.instance.name))
    if not fits:
        rejections = [o for o in shown.values() if isinstance(o, Rejection)]
        return explain_infeasible(model, env, catalogue, rejections, index,
                                  lambda inst: _fits_anywhere(model, env, catalogue, inst))
    return fits[0], decision_for(model, env, fits[0], shown, found, single_node), found


def may_serve_within(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                     ceiling_usd: float) -> bool:
    """False when no layout of any precision the model allows meets the SLA for at most ``ceiling_usd`` USD/h at
    the ranking price: the search runs as the planner's does, bounded by the ceiling (a layout whose floor is
    above it is never simulated; one that is simulated, only up to the replicas that cost no more). The
    planner's own plan of the model then costs no less (it picks the cheapest candidate of the same search, or
    a single-node one when any exists). True only says a cheaper plan may exist: the caller plans it in full."""
    instances = allowed_instances(model, env, catalogue)
    if override_problem(model, env, catalogue, 0, instances) is not None:
        return False
    variants = [with_fields(model, weights_changes(model, d)) for d in model.precisions()] \
        if model.precision is not None else [model]
    for variant in variants:
        assert isinstance(variant, LlmModelSpec)
        correction = measured_correction(variant, env, catalogue)
        for multi_node in (False, True):
            found = search(variant, env, catalogue, instances, multi_node, correction=correction,
                           bound_usd=ceiling_usd)
            if any(isinstance(o, LlmCandidate) for outs in found.values() for o in outs):
                return True
    return False


def allowed_instances(model: LlmModelSpec, env: EnvironmentSpec,
                      catalogue: InstanceCatalogue) -> tuple[InstanceType, ...]:
    if model.overrides.instance_type:
        inst = catalogue.instances.get(model.overrides.instance_type)
        return (inst,) if inst is not None and inst.family in env.instance_families else ()
    return catalogue.in_families(env.instance_families)


def _fits_anywhere(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                   instance: InstanceType) -> bool:
    return any(isinstance(o, LlmCandidate) for multi in (False, True)
               for o in search(model, env, catalogue, (instance,), multi, prune=False)[instance.name])
