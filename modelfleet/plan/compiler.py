"""compile_fleet: (FleetSpec, EnvironmentSpec, InstanceCatalogue) -> FleetPlan. Pure; raises CompileError."""

from __future__ import annotations

import math

from ..errors import CompileError, Issue
from ..spec.environment import EnvironmentSpec
from ..spec.load import apply_environment
from ..spec.models import ClassicModelSpec, FleetSpec, LlmModelSpec
from .classic import compile_classic
from .engine_args import vllm_serve_args, vllm_shm_gib
from .fit import check_fit, with_requested, zone_warnings
from .instances import InstanceCatalogue
from .kubelet import memory_share_gib
from .layout import size_node_groups
from .llm import LlmCandidate, choose_llm_layout, llm_params, load_sequences, replica_bounds
from .llm_measured import with_measurement
from .names import node_group_name
from .node_disks import with_node_disks
from .pipelines import pipelines_in
from .pod_resources import with_pods
from .precision import llm_weights_gib
from .pins import from_hub_id, pin_issues, pinned_artifact
from .rollout import llm_rollout
from .types import Decision, FleetPlan, NodeGroupPlan, TritonServerPlan, VllmModelPlan, Warning_

Indexed = tuple[int, ClassicModelSpec | LlmModelSpec]


def models_in(fleet: FleetSpec, environment: str) -> list[Indexed]:
    """The fleet as it runs in ``environment`` (patches applied, disabled models left out), by name."""
    out = []
    for index, model in enumerate(fleet.models):
        applied = apply_environment(model, environment)
        if applied is not None:
            out.append((index, applied))
    return sorted(out, key=lambda pair: pair[1].name)


def compile_fleet(fleet: FleetSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue) -> FleetPlan:
    """Decide everything for one environment; every infeasibility is collected and raised once."""
    models = models_in(fleet, env.name)
    classic = [(i, m) for i, m in models if isinstance(m, ClassicModelSpec)]
    llms = [(i, m) for i, m in models if isinstance(m, LlmModelSpec)]
    issues: list[Issue] = []
    warnings: list[Warning_] = []
    pin_issues(models, env, issues, warnings)
    vllm_plans = []
    for index, model in llms:
        chosen = choose_llm_layout(model, env, catalogue, index)
        if isinstance(chosen, Issue):
            issues.append(chosen)
            continue
        vllm_plans.append(_vllm_plan(model, env, *chosen, warnings=warnings, issues=issues, index=index))
    # Triton models go where they add least to the environment: GPUs the LLMs leave idle are free to them.
    pipelines = pipelines_in(fleet, env.name, {m.name: m for _, m in classic}, issues)
    triton_models, servers, pipeline_plans = compile_classic(classic, pipelines, env, catalogue, issues, warnings,
                                                             gpus_in_use(vllm_plans))
    if issues:
        raise CompileError(issues)
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
    )
    plan = with_requested(with_pods(with_node_disks(plan, env, catalogue), env.deploy.daemonset_allowance))
    if fit := check_fit(plan, {m.name: f"models[{i}]" for i, m in models}):
        raise CompileError(fit)
    if zones := zone_warnings(plan):
        plan = plan.model_copy(update={"warnings": tuple(sorted((*plan.warnings, *zones), key=lambda w: (w.model, w.message)))})
    return plan


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


def _vllm_plan(model: LlmModelSpec, env: EnvironmentSpec, chosen: LlmCandidate, decision: Decision, *,
               warnings: list[Warning_], issues: list[Issue], index: int) -> VllmModelPlan:
    lo, desired, hi = replica_bounds(model, env, chosen.max_num_seqs)
    gpus_per_pod, precision = chosen.tp, chosen.precision
    util = model.overrides.gpu_memory_utilization or env.vllm.gpu_memory_utilization
    prefix = env.vllm.enable_prefix_caching if model.overrides.enable_prefix_caching is None else (
        model.overrides.enable_prefix_caching)
    artifact = pinned_artifact(model)
    args = vllm_serve_args(artifact=artifact, served_name=model.name, tp=chosen.tp, pp=chosen.pp,
                           max_model_len=model.sla.max_context_tokens, max_num_seqs=chosen.max_num_seqs,
                           gpu_memory_utilization=util, dtype=precision.dtype_flag,
                           quantization=precision.quantization_flag, kv_cache_dtype=precision.kv_cache_dtype,
                           prefix_caching=prefix, revision=model.revision if from_hub_id(model.artifact) else None)
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
        min_replicas=lo, max_replicas=hi, spread_zones=lo >= 2, gpus_per_replica=chosen.tp * chosen.pp,
        nodes_per_replica=chosen.pp, gpus_per_pod=gpus_per_pod, tensor_parallel_size=chosen.tp,
        pipeline_parallel_size=chosen.pp, max_num_seqs=chosen.max_num_seqs, max_model_len=model.sla.max_context_tokens,
        weights_gib=round(weights, 3), kv_cache_gib=round(chosen.kv_cache_gib, 3), kv_cache_tokens=chosen.kv_cache_tokens,
        gpu_memory_utilization=util, dtype=precision.weights, kv_cache_dtype=precision.kv_cache_dtype,
        estimated_ttft_ms=round(chosen.ttft_ms, 1), artifact=artifact, args=args, revision=model.revision,
        tpot_ms=round(1000 / model.profile.output_tokens_per_s_per_sequence, 3),
        shm_size_gib=vllm_shm_gib(gpus_per_pod), memory_request_gib=round(ram_share, 1), image=env.vllm.image,
        decisions=(decision, _precision_decision(chosen)), quantization=precision.quantization_flag,
        checkpoint_gib=round(weights * (2.0 if precision.quantization_flag and not model.quantization else 1.0), 3),
        p99_ttft_ms=model.sla.p99_ttft_ms, availability=model.sla.availability,
        # sla.p99_tpot_ms is being added to the language (issue 13); its alert appears once the field exists
        p99_tpot_ms=getattr(model.sla, "p99_tpot_ms", None),
        rollout=llm_rollout(model, env, (lo, desired, hi), chosen.pp, chosen.instance.name, index, issues, warnings))
    return with_measurement(plan, model, chosen.instance.gpu.key, load_sequences(model), index, issues, warnings)


def _precision_decision(chosen: LlmCandidate) -> Decision:
    precision = chosen.precision
    kv = ("fp8, as overrides.kv_cache_dtype asks (half the memory; uncalibrated scales unless the checkpoint "
          "ships them)" if precision.kv_cache_dtype == "fp8" else
          "auto: the 16-bit activation dtype, exact; set overrides.kv_cache_dtype: fp8 to halve it")
    return Decision(choice=precision.describe(), reason=f"{precision.source}; KV cache {kv}")


def _llm_warnings(model: LlmModelSpec, env: EnvironmentSpec, chosen: LlmCandidate, warnings: list[Warning_]) -> None:
    notes = list(chosen.precision.notes)
    assumed = llm_params(model)[1]
    if assumed:
        notes.append(assumed)
    peak = model.sla.peak_concurrent_sequences
    if env.replicas.single_replica and peak and peak > chosen.max_num_seqs:
        notes.append(f"single-replica environment: 1 replica serves {chosen.max_num_seqs} of the {peak} peak sequences")
    warnings.extend(Warning_(model=model.name, message=note) for note in notes)


def _node_groups(env: EnvironmentSpec, catalogue: InstanceCatalogue, servers: list[TritonServerPlan],
                 llms: list[VllmModelPlan]) -> tuple[NodeGroupPlan, ...]:
    """One node group per instance type: nodes for min, desired and max (plus surge) replicas of what lands
    there, and its zones (layout.py). Disks, allocatable and requests come once the plan exists. A CPU type's
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
