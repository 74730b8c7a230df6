"""compile_fleet: (FleetSpec, EnvironmentSpec, InstanceCatalogue) -> FleetPlan. Pure; raises CompileError."""

from __future__ import annotations

import math

from ..errors import CompileError, Issue
from ..spec.environment import EnvironmentSpec
from ..spec.lock import LlmLock, StackLock
from ..spec.load import apply_environment
from ..spec.units import format_param_count
from ..spec.models import ArchitectureSpec, ClassicModelSpec, FleetSpec, LlmModelSpec
from .triton.classic import compile_classic
from .serving.engine_args import LoraArgs, lora_source, vllm_serve_args, vllm_shm_gib
from .capacity.cold_start import scales_to_zero, with_cold_starts
from .capacity.fit import check_fit, with_requested, zone_warnings
from .capacity.provisioning import with_provisioning
from .capacity.reservations import consume, with_reservations
from .hardware.gpus import unknown_gpu_issues
from .hardware.instances import InstanceCatalogue
from .hardware.kubelet import memory_share_gib
from .capacity.node_groups import size_node_groups
from .llm.search import LlmCandidate, replica_bounds
from .llm.precision_choice import Precise, as_searched, choose_precision, search_key
from .llm.explain import architecture_decision, kept_tpot, kept_ttft
from .llm.measured import with_measurement
from .llm.speed.load import Fit
from .llm.speed.peak import SIMULATION_SOURCE, traffic_of, traffic_plan
from .name_checks import name_issues
from .names import node_group_name
from .sizing import spreads_over_zones
from .lock import fresh_models, pinned_llm
from .capacity.node_disks import with_node_disks
from .triton.pipelines import pipelines_in
from .triton.llm_steps import split_llm_steps, with_llm_step_memory, with_llm_steps
from .capacity.pod_resources import with_pods
from .llm.shape import llm_weights_gib, params_hint, weight_dtype
from .pins import pin_issues, pinned_artifact
from .capacity.rollout import llm_rollout
from .triton.sequences import with_session_affinity
from .llm.weights import weights_plan
from .types import (Decision, FleetPlan, LlmEstimatesPlan, NodeGroupPlan, TritonServerPlan, VllmModelPlan, Warning_,
                    WeightsPlan)

Indexed = tuple[int, ClassicModelSpec | LlmModelSpec]


def models_in(fleet: FleetSpec, environment: str) -> list[Indexed]:
    """The fleet as it runs in ``environment`` (patches applied, disabled models left out), by name."""
    out = []
    for index, model in enumerate(fleet.models):
        applied = apply_environment(model, environment)
        if applied is not None:
            out.append((index, applied))
    return sorted(out, key=lambda pair: pair[1].name)


def compile_fleet(fleet: FleetSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                  lock: StackLock | None = None) -> FleetPlan:
    """Decide everything for one environment; every infeasibility is collected and raised once. ``lock``: the
    stack's placement lock (plan/lock.py): the models the change does not name keep their placements; None
    solves the whole placement afresh (the global optimum)."""
    models = models_in(fleet, env.name)
    fresh = fresh_models([m for _, m in models], lock) if lock else frozenset()
    classic = [(i, m) for i, m in models if isinstance(m, ClassicModelSpec)]
    llms = [(i, m) for i, m in models if isinstance(m, LlmModelSpec)]
    if unknown := unknown_gpu_issues(models, catalogue):  # every later step looks these GPUs up
        raise CompileError(unknown)
    issues: list[Issue] = []
    warnings: list[Warning_] = []
    if fresh:  # placed afresh now, and again by every compile until the lock records them
        warnings.append(Warning_(model="placement lock", message=f"{', '.join(sorted(fresh))}: new or changed since "
                                 f"the lock was written; record the placement with `modelfleet plan --stack {env.name} "
                                 "--write-lock` in this pull request, so that a later change keeps it"))
    pin_issues(models, env, issues, warnings)
    vllm_plans = []
    unreserved = env  # the reservations the models placed so far have not taken (capacity/reservations.py)
    searched: dict[tuple[str, tuple], Precise] = {}  # by search_key and the reservations left: one search each
    for index, model in reservation_order(llms, env):
        entry = lock.llms.get(model.name) if lock and model.name not in fresh else None
        key = (search_key(model), unreserved.capacity_reservations)
        if entry is None and key in searched:
            chosen: Precise | Issue = as_searched(model, searched[key])
        else:
            chosen = _locked_precision(model, entry, unreserved, catalogue, index, warnings)
            if entry is None and not isinstance(chosen, Issue):
                searched[key] = chosen
        if isinstance(chosen, Issue):
            issues.append(chosen)
            continue
        model, (candidate, decision, found), picked = chosen
        unreserved = consume(unreserved, candidate.instance.name, candidate.nodes)
        extra = architecture_decision(model, candidate, found)
        decisions = (decision, _precision_decision(candidate)) + ((picked,) if picked else ()) + (
            (extra,) if extra else ())
        vllm_plans.append(_vllm_plan(model, env, candidate, decisions, warnings=warnings, issues=issues, index=index))
    # Triton models go where they add least to the environment: GPUs the LLMs leave idle are free to them.
    pipelines = pipelines_in(fleet, env.name, {m.name: m for _, m in classic}, issues,
                             frozenset(m.name for m in vllm_plans))
    split = {p.name: split_llm_steps(i, p, {m.name: m for m in vllm_plans}, env.namespace, issues)
             for i, p in pipelines}
    triton_models, servers, pipeline_plans = compile_classic(
        classic, [(i, split[p.name][0]) for i, p in pipelines if split[p.name]], env, catalogue, issues, warnings,
        gpus_in_use(vllm_plans), lock, fresh)
    full = {p.name: p for _, p in pipelines}
    pipeline_plans = [with_llm_steps(pp, full[pp.name], split[pp.name][1], warnings) for pp in pipeline_plans]
    servers = with_llm_step_memory(servers, pipeline_plans)
    if issues:
        raise CompileError(issues)
    servers, vllm_plans = idle_at_zero(servers, vllm_plans, env)
    plan = FleetPlan(
        environment=env.name, region=env.region, capacity_type=env.capacity_type,
        kubernetes_version=env.kubernetes_version, namespace=env.namespace, catalogue_as_of=catalogue.as_of,
        node_groups=_node_groups(env, catalogue, servers, vllm_plans),
        triton_servers=tuple(sorted(servers, key=lambda s: s.name)),
        models=tuple(sorted([*triton_models, *vllm_plans], key=lambda m: m.name)),
        warnings=tuple(sorted(warnings, key=lambda w: (w.model, w.message))),
        pipelines=tuple(sorted(pipeline_plans, key=lambda p: p.name)),
        gateway_name=env.gateway.name if env.gateway else None,
        gateway_namespace=(env.gateway.namespace or env.namespace) if env.gateway else None,
        callers=env.callers,
    )
    plan = with_requested(with_pods(with_node_disks(plan, env, catalogue), env.deploy.daemonset_allowance))
    plan = with_session_affinity(plan)
    where = {m.name: f"models[{i}]" for i, m in models}
    named_by = {m.name: f"models[{i}].{'pool' if getattr(m, 'pool', None) else 'name'}" for i, m in models}
    if problems := name_issues(plan, named_by) + check_fit(plan, where):
        raise CompileError(problems)
    if zones := zone_warnings(plan):
        plan = plan.model_copy(update={"warnings": tuple(sorted((*plan.warnings, *zones), key=lambda w: (w.model, w.message)))})
    plan = with_reservations(with_provisioning(plan, env, catalogue), env, catalogue)
    return with_cold_starts(plan)


def idle_at_zero(servers: list[TritonServerPlan], llms: list[VllmModelPlan],
                 env: EnvironmentSpec) -> tuple[list[TritonServerPlan], list[VllmModelPlan]]:
    """Workloads that may scale to zero (capacity/cold_start.py) at a minimum of 0 replicas, before their node
    groups are sized (whose minimum then follows)."""
    return ([s.model_copy(update={"min_replicas": 0}) if scales_to_zero(env, s.min_replicas) else s for s in servers],
            [p.model_copy(update={"min_replicas": 0}) if scales_to_zero(env, p.min_replicas) else p for p in llms])


def reservation_order(llms: list[Indexed], env: EnvironmentSpec) -> list[Indexed]:
    """The LLMs in the order they are placed: by name, or, when the stack has reservations, the largest
    weights first, so reserved nodes go to the models that save most on them (the plan is sorted by name after)."""
    if not env.capacity_reservations:
        return llms
    return sorted(llms, key=lambda pair: (-llm_weights_gib(pair[1]), pair[1].name))  # type: ignore[arg-type]


def _locked_precision(model: LlmModelSpec, entry: LlmLock | None, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                      index: int, warnings: list[Warning_]):
    """choose_precision, kept at the lock's instance type and layout when the fresh search would move an
    unchanged LLM and the locked one still meets its SLA (else re-placed, with the reason)."""
    chosen = choose_precision(model, env, catalogue, index)
    if entry is None or isinstance(chosen, Issue) or _kept(chosen, entry):
        return chosen
    locked = choose_precision(pinned_llm(model, entry), env, catalogue, index)
    if isinstance(locked, Issue) or not _kept(locked, entry):
        warnings.append(Warning_(model=model.name, message=f"re-placed despite the placement lock: its locked "
                                 f"{entry.instance_type} tp={entry.tp} pp={entry.pp} {entry.precision} no longer "
                                 "meets its SLA, the fit check or the stack's instance families"))
        return chosen
    return locked


def _kept(chosen, entry: LlmLock) -> bool:
    _, (candidate, _, _), _ = chosen
    return (candidate.instance.name, candidate.tp, candidate.pp, candidate.expert_parallel,
            candidate.precision.weights) == (entry.instance_type, entry.tp, entry.pp, entry.ep, entry.precision)


def gpus_in_use(llms: list[VllmModelPlan]) -> dict[str, tuple[int, int]]:
    """Per instance type: GPUs the LLMs hold at desired replicas, and the zone spread they force (as
    _node_groups counts)."""
    used: dict[str, tuple[int, int]] = {}
    workloads = [(p.instance_type, p.gpus_per_replica * p.replicas,
                  p.min_replicas * p.nodes_per_replica if p.spread_zones else 0) for p in llms]
    for instance_type, gpus, spread in workloads:
        held, most = used.get(instance_type, (0, 0))
        used[instance_type] = (held + gpus, max(most, spread))
    return used


def _vllm_plan(model: LlmModelSpec, env: EnvironmentSpec, chosen: LlmCandidate, decisions: tuple[Decision, ...], *,
               warnings: list[Warning_], issues: list[Issue], index: int) -> VllmModelPlan:
    lo, desired, hi = replica_bounds(model, env, chosen.replicas)
    gpus_per_pod, precision, fit = chosen.tp, chosen.precision, chosen.fit
    util = model.overrides.gpu_memory_utilization or env.vllm.gpu_memory_utilization
    checkpoint = round(llm_weights_gib(model) * (2.0 if chosen.precision.quantization_flag and not model.quantization
                                                  else 1.0), 3)
    artifact = pinned_artifact(model)
    weights_from = weights_plan(artifact=artifact, revision=model.revision, checkpoint_gib=checkpoint, tp=chosen.tp,
                                pp=chosen.pp, environment=env.name, deploy=env.deploy)
    args = _serve_args(model, env, chosen, util, weights_from)
    group = node_group_name(chosen.instance.name, env.capacity_type)
    weights = llm_weights_gib(model)
    # 85% of the pod's share of the node's RAM, at most its share of what the kubelet offers beside the
    # DaemonSets (a g6.xlarge's 16 GiB offer 12.8: 85% of 16 would never schedule).
    ram_share = min(chosen.instance.ram_gib * 0.85 * gpus_per_pod / chosen.instance.gpus,
                    math.floor(10 * memory_share_gib(chosen.instance, env.deploy.ami_type,
                                                     env.deploy.daemonset_allowance, gpus_per_pod)) / 10)
    _llm_warnings(model, env, chosen, warnings)
    plan = VllmModelPlan(
        name=model.name, team=model.team, node_group=group, instance_type=chosen.instance.name, replicas=desired,
        min_replicas=lo, max_replicas=hi, spread_zones=spreads_over_zones(lo), gpus_per_replica=chosen.tp * chosen.pp,
        nodes_per_replica=chosen.pp, gpus_per_pod=gpus_per_pod, tensor_parallel_size=chosen.tp,
        pipeline_parallel_size=chosen.pp, max_num_seqs=fit.max_num_seqs, max_model_len=model.sla.max_context_tokens,
        weights_gib=round(weights, 3), kv_cache_gib=round(chosen.sized.kv_gib, 3),
        kv_cache_tokens=chosen.sized.kv_tokens, gpu_memory_utilization=util, dtype=precision.weights,
        kv_cache_dtype=precision.kv_cache_dtype, estimated_ttft_ms=round(fit.ttft_p99_ms, 1),
        artifact=artifact, args=args, revision=model.revision, tpot_ms=_tpot_gate(model, fit),
        shm_size_gib=vllm_shm_gib(gpus_per_pod), memory_request_gib=round(ram_share, 1),
        image=model.image or env.vllm.image, decisions=decisions, quantization=precision.quantization_flag,
        checkpoint_gib=checkpoint, weights=weights_from,
        p99_ttft_ms=model.sla.p99_ttft_ms, p99_tpot_ms=model.sla.p99_tpot_ms, availability=model.sla.availability,
        rollout=llm_rollout(model, env, (lo, desired, hi), chosen.pp, chosen.instance.name, index, issues, warnings),
        max_num_batched_tokens=fit.max_num_batched_tokens, expert_parallel=chosen.expert_parallel,
        lora_adapters=tuple(a.name for a in model.lora.adapters) if model.lora else (),
        lora_downloads=lora_downloads(model),
        lora_gib=round(chosen.sized.lora_gib, 3), binding_constraint=fit.binding, estimates=estimates_of(model, chosen),
        hub_token_required=model.hub_gated()[0])
    # the sequences in flight at peak, as the plan spreads them (a rate load's too): what a measurement is held to
    return with_measurement(plan, model, chosen.instance.gpu.key, fit.sequences_per_replica * desired, index, issues,
                            warnings)


def _tpot_gate(model: LlmModelSpec, fit: Fit) -> float:
    """The canary analysis's p99 TPOT bound: the SLA's, or the slowest the plan lets a stream get."""
    return float(model.sla.p99_tpot_ms) if model.sla.p99_tpot_ms is not None else round(fit.tpot_at_max_ms, 3)


def estimates_of(model: LlmModelSpec, chosen: LlmCandidate) -> LlmEstimatesPlan:
    fit = chosen.fit
    sim = fit.simulation
    return LlmEstimatesPlan(
        prefill_ms=round(fit.prefill_ms, 1), ttft_p99_ms=kept_ttft(fit.ttft_p99_ms), tpot_ms=round(fit.tpot_ms, 2),
        tpot_at_max_num_seqs_ms=round(fit.tpot_at_max_ms, 2), sequences_per_replica=fit.sequences_per_replica,
        input_tokens=model.sla.input_tokens(), output_tokens=model.sla.output_tokens(),
        output_tokens_per_s_per_replica=round(fit.output_tokens_per_s_per_replica, 1),
        source=f"{SIMULATION_SOURCE}, step times from {chosen.source}",
        traffic=traffic_plan(traffic_of(model.sla), fit.replicas), ttft_p50_ms=round(sim.ttft_p50_ms, 1),
        ttft_p99_bound_ms=kept_ttft(sim.ttft_p99_high_ms), tpot_p50_ms=round(sim.tpot_p50_ms, 2),
        tpot_p99_ms=kept_tpot(sim.tpot_p99_ms), tpot_p99_bound_ms=kept_tpot(sim.tpot_p99_high_ms),
        itl_p99_ms=round(sim.itl_p99_ms, 2), simulated_requests=sim.simulated_requests,
        closed_form_ttft_p99_ms=fit.closed_form_ttft_p99_ms, simulations=fit.simulations)


def lora_downloads(model: LlmModelSpec) -> tuple[tuple[str, str, str], ...]:
    """(local folder, Hub id, commit) of each pinned LoRA adapter, for the pod's download step."""
    adapters = model.lora.adapters if model.lora else ()
    return tuple((lora_source(a.name, a.artifact, a.revision), a.artifact, a.revision) for a in adapters if a.revision)


def _serve_args(model: LlmModelSpec, env: EnvironmentSpec, chosen: LlmCandidate, util: float,
                weights: WeightsPlan) -> tuple[str, ...]:
    precision = chosen.precision
    prefix = env.vllm.enable_prefix_caching if model.overrides.enable_prefix_caching is None else (
        model.overrides.enable_prefix_caching)
    lora = None if model.lora is None else LoraArgs(
        tuple((a.name, lora_source(a.name, a.artifact, a.revision)) for a in model.lora.adapters),
        model.lora.max_rank, model.lora.loras)
    return vllm_serve_args(artifact=weights.uri, served_name=model.name, tp=chosen.tp, pp=chosen.pp,
                           max_model_len=model.sla.max_context_tokens, max_num_seqs=chosen.fit.max_num_seqs,
                           gpu_memory_utilization=util, dtype=precision.dtype_flag,
                           quantization=precision.quantization_flag, kv_cache_dtype=precision.kv_cache_dtype,
                           prefix_caching=prefix, max_num_batched_tokens=chosen.fit.max_num_batched_tokens,
                           expert_parallel=chosen.expert_parallel, lora=lora, extra=model.overrides.extra_args,
                           revision=model.revision if weights.source == "hub" else None,
                           distributed_load=weights.distributed)


def _precision_decision(chosen: LlmCandidate) -> Decision:
    precision = chosen.precision
    kv = ("fp8, as overrides.kv_cache_dtype asks (half the memory; uncalibrated scales unless the checkpoint "
          "ships them)" if precision.kv_cache_dtype == "fp8" else
          "auto: the 16-bit activation dtype, exact; set overrides.kv_cache_dtype: fp8 to halve it")
    return Decision(choice=precision.describe(), reason=f"{precision.source}; KV cache {kv}")


def _llm_warnings(model: LlmModelSpec, env: EnvironmentSpec, chosen: LlmCandidate, warnings: list[Warning_]) -> None:
    notes = list(chosen.precision.notes)
    if isinstance(model.architecture, ArchitectureSpec) and model.size.params is None:
        notes.append(f"speed estimated for the {format_param_count(params_hint(model) or 0)} parameters size.memory_gib "
                     f"holds at {weight_dtype(model)}; declare size.params for a better estimate")
    fit, sla = chosen.fit, model.sla
    if fit.shortfall:
        where = "single-replica environment" if env.replicas.single_replica else "overrides.replicas"
        notes.append(f"{where}: {fit.shortfall}")
    sim = fit.simulation
    if not fit.shortfall and (sim.ttft_p99_high_ms > sla.p99_ttft_ms or (
            sla.p99_tpot_ms is not None and sim.tpot_p99_high_ms > sla.p99_tpot_ms)):
        notes.append(f"pinned to {fit.replicas} replica(s) ({fit.binding}), it misses the SLA at peak: simulated p99 "
                     f"TTFT {kept_ttft(fit.ttft_p99_ms):,.0f} ms (sla {sla.p99_ttft_ms:g}), p99 TPOT "
                     f"{kept_tpot(sim.tpot_p99_ms):.1f} ms"
                     + (f" (sla {sla.p99_tpot_ms:g})" if sla.p99_tpot_ms is not None else ""))
    if "output_tokens_per_s_per_sequence" in model.profile.model_fields_set:
        notes.append("profile.output_tokens_per_s_per_sequence no longer sets the decode speed: the planner predicts "
                     "it (estimates.tpot_ms), and a measured profile corrects the prediction")
    if model.sla.avg_input_tokens is None:
        notes.append(f"no sla.avg_input_tokens: planned for prompts of {model.sla.input_tokens():,} tokens, the context "
                     f"less the answer (the worst case); declare the average prompt to size for it")
    if model.sla.p99_tpot_ms is None:
        notes.append(f"no sla.p99_tpot_ms: max_num_seqs {chosen.fit.max_num_seqs} is bounded by memory alone, and a "
                     f"stream then gets a token every {chosen.fit.tpot_at_max_ms:.1f} ms when all run; declare the "
                     "p99 TPOT your users need")
    warnings.extend(Warning_(model=model.name, message=note) for note in notes)


def _node_groups(env: EnvironmentSpec, catalogue: InstanceCatalogue, servers: list[TritonServerPlan],
                 llms: list[VllmModelPlan]) -> tuple[NodeGroupPlan, ...]:
    """One node group per instance type: nodes for min, desired and max (plus surge) replicas of what lands
    there, and its zones (capacity/node_groups.py). Disks, allocatable and requests come once the plan exists. A CPU type's
    group holds KIND_CPU servers, one pod per node."""
    types = {*(s.instance_type for s in servers), *(p.instance_type for p in llms)}
    slots = {i: catalogue.instances[i].gpus if i in catalogue.instances else 1 for i in types}
    groups = []
    for instance_type, layout in size_node_groups(servers, llms, slots, env.availability_zones).items():
        groups.append(NodeGroupPlan.model_construct(
            capacity_type=env.capacity_type, min_size=layout.sizes["min"], desired_size=layout.sizes["desired"],
            max_size=layout.sizes["max"], zones=layout.zones, zonal=layout.zonal, zone_reason=layout.zone_reason,
            workloads=tuple(layout.workloads), **_hardware(catalogue, instance_type, env.capacity_type)))
    return tuple(groups)


def _hardware(catalogue: InstanceCatalogue, instance_type: str, capacity_type: str) -> dict:
    """A node group's name and hardware fields: a GPU type's, or a CPU type's (no GPU, its processor)."""
    gpu = catalogue.instances.get(instance_type)
    if gpu is not None:
        return {"name": node_group_name(instance_type, capacity_type), "instance_type": instance_type,
                "gpus_per_node": gpu.gpus, "gpu_memory_gib": gpu.gpu_memory_gib, "gpu_model": gpu.gpu.name,
                "vcpu": gpu.vcpu, "ram_gib": gpu.ram_gib, "device": "gpu", "processor": ""}
    cpu = catalogue.cpu_instances[instance_type]
    return {"name": node_group_name(instance_type, capacity_type, cpu=True), "instance_type": instance_type,
            "gpus_per_node": 0, "gpu_memory_gib": 0.0, "gpu_model": "", "vcpu": cpu.vcpu, "ram_gib": cpu.ram_gib,
            "device": "cpu", "processor": cpu.processor.name}
