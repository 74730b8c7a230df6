"""compile_fleet: (FleetSpec, EnvironmentSpec, InstanceCatalogue) -> FleetPlan. Pure; raises CompileError."""

from __future__ import annotations

from collections import Counter, defaultdict

from ..errors import CompileError, Issue
from ..spec.environment import EnvironmentSpec
from ..spec.load import apply_environment
from ..spec.models import ClassicModelSpec, FleetSpec, LlmModelSpec
from .engine_args import triton_server_args, vllm_serve_args, vllm_shm_gib
from .instances import InstanceCatalogue
from .llm import LlmCandidate, choose_llm_layout, llm_params, replica_bounds
from .names import node_group_name, stable_name
from .node_volume import size_root_volume
from .classic import compile_classic
from .pipelines import pipelines_in
from .precision import llm_weights_gib
from .sizing import nodes_for_pods
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
    vllm_plans, llm_servers = [], []
    for index, model in llms:
        chosen = choose_llm_layout(model, env, catalogue, index)
        if isinstance(chosen, Issue):
            issues.append(chosen)
            continue
        plan, server = _vllm_plan(model, env, *chosen, warnings=warnings, issues=issues, index=index)
        vllm_plans.append(plan)
        if server is not None:
            llm_servers.append(server)
    # Triton models go where they add least to the environment: GPUs the LLMs leave idle are free to them.
    pipelines = pipelines_in(fleet, env.name, {m.name: m for _, m in classic}, issues)
    triton_models, servers, pipeline_plans = compile_classic(classic, pipelines, env, catalogue, issues, warnings,
                                                             gpus_in_use(llm_servers, vllm_plans))
    servers += llm_servers
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
    )
    return _with_root_volumes(plan, env.deploy.node_disk_gib)


def _with_root_volumes(plan: FleetPlan, floor_gib: int) -> FleetPlan:
    """Each node group's root volume, sized once the plan holds every workload placed on it (what they write
    and how fast: node_volume.py); until then the groups are built without one (``_node_groups``)."""
    groups = tuple(g.model_copy(update={"root_volume": size_root_volume(plan, g.name, floor_gib)})
                   for g in plan.node_groups)
    return plan.model_copy(update={"node_groups": groups})


def gpus_in_use(servers: list[TritonServerPlan], llms: list[VllmModelPlan]) -> dict[str, tuple[int, int]]:
    """Per instance type: GPUs held at desired replicas, and the zone spread forced (as _node_groups counts)."""
    used: dict[str, tuple[int, int]] = {}
    served = {s.models[0] for s in servers}
    workloads = [(s.instance_type, s.gpus_per_replica * s.replicas, s.min_replicas if s.spread_zones else 0)
                 for s in servers]
    workloads += [(p.instance_type, p.gpus_per_replica * p.replicas,
                   p.min_replicas * p.nodes_per_replica if p.spread_zones else 0) for p in llms if p.name not in served]
    for instance_type, gpus, spread in workloads:
        held, most = used.get(instance_type, (0, 0))
        used[instance_type] = (held + gpus, max(most, spread))
    return used


def _vllm_plan(model: LlmModelSpec, env: EnvironmentSpec, chosen: LlmCandidate, decision: Decision, *,
               warnings: list[Warning_], issues: list[Issue], index: int) -> tuple[VllmModelPlan, TritonServerPlan | None]:
    lo, desired, hi = replica_bounds(model, env, chosen.max_num_seqs)
    gpus_per_pod, precision = chosen.tp, chosen.precision
    serving = model.serving or "vllm"
    util = model.overrides.gpu_memory_utilization or env.vllm.gpu_memory_utilization
    prefix = env.vllm.enable_prefix_caching if model.overrides.enable_prefix_caching is None else (
        model.overrides.enable_prefix_caching)
    args = vllm_serve_args(artifact=model.artifact, served_name=model.name, tp=chosen.tp, pp=chosen.pp,
                           max_model_len=model.sla.max_context_tokens, max_num_seqs=chosen.max_num_seqs,
                           gpu_memory_utilization=util, dtype=precision.dtype_flag,
                           quantization=precision.quantization_flag, kv_cache_dtype=precision.kv_cache_dtype,
                           prefix_caching=prefix)
    group = node_group_name(chosen.instance.name, env.capacity_type)
    weights = llm_weights_gib(model)
    ram_share = chosen.instance.ram_gib * 0.85 * gpus_per_pod / chosen.instance.gpus
    _llm_warnings(model, env, chosen, warnings)
    plan = VllmModelPlan(
        name=model.name, serving=serving, node_group=group, instance_type=chosen.instance.name, replicas=desired,
        min_replicas=lo, max_replicas=hi, spread_zones=lo >= 2, gpus_per_replica=chosen.tp * chosen.pp,
        nodes_per_replica=chosen.pp, gpus_per_pod=gpus_per_pod, tensor_parallel_size=chosen.tp,
        pipeline_parallel_size=chosen.pp, max_num_seqs=chosen.max_num_seqs, max_model_len=model.sla.max_context_tokens,
        weights_gib=round(weights, 3), kv_cache_gib=round(chosen.kv_cache_gib, 3), kv_cache_tokens=chosen.kv_cache_tokens,
        gpu_memory_utilization=util, dtype=precision.weights, kv_cache_dtype=precision.kv_cache_dtype,
        estimated_ttft_ms=round(chosen.ttft_ms, 1), artifact=model.artifact, args=args,
        shm_size_gib=vllm_shm_gib(gpus_per_pod), memory_request_gib=round(ram_share, 1), image=env.vllm.image,
        decisions=(decision, _precision_decision(chosen)), quantization=precision.quantization_flag,
        checkpoint_gib=round(weights * (2.0 if precision.quantization_flag and not model.quantization else 1.0), 3))
    if serving != "triton":
        return plan, None
    return plan, _triton_llm_server(model, env, plan, warnings, issues, index)


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


def _triton_llm_server(model: LlmModelSpec, env: EnvironmentSpec, plan: VllmModelPlan, warnings: list[Warning_],
                       issues: list[Issue], index: int) -> TritonServerPlan | None:
    warnings.append(Warning_(model=model.name, message="LLM served by Triton's vLLM backend: no OpenAI API, no "
                             "pipeline parallelism and no queue timeout (decoupled models bypass the dynamic "
                             "batcher); prefer serving: vllm"))
    if plan.pipeline_parallel_size > 1:
        issues.append(Issue("", 0, 0, f"models[{index}].serving", f"{model.name}: needs "
                            f"{plan.pipeline_parallel_size} nodes per replica, which Triton's vLLM backend cannot span",
                            "use serving: vllm"))
        return None
    return TritonServerPlan(
        name=stable_name("triton", model.name), node_group=plan.node_group, instance_type=plan.instance_type,
        replicas=plan.replicas, min_replicas=plan.min_replicas, max_replicas=plan.max_replicas,
        spread_zones=plan.spread_zones, gpus_per_replica=plan.gpus_per_pod, models=(model.name,),
        gpu_memory_used_gib=round(plan.weights_gib + plan.kv_cache_gib, 3), gpu_compute_used=1.0,
        cache_size_bytes=0, memory_request_gib=plan.memory_request_gib,
        args=triton_server_args(env.triton.exit_timeout_secs, 0, 0), image=env.triton.image, python_shm_bytes=0,
        decision=plan.decisions[0])


def _node_groups(env: EnvironmentSpec, catalogue: InstanceCatalogue, servers: list[TritonServerPlan],
                 llms: list[VllmModelPlan]) -> tuple[NodeGroupPlan, ...]:
    """One node group per instance type: nodes for min, desired and max replicas of what lands there."""
    pods: dict[str, dict[str, Counter[int]]] = defaultdict(lambda: {k: Counter() for k in ("min", "desired", "max")})
    spread: dict[str, int] = defaultdict(lambda: 1)
    workloads: dict[str, list[str]] = defaultdict(list)
    llm_servers = {s.models[0] for s in servers if s.models and any(p.name == s.models[0] for p in llms)}
    for s in servers:
        _add(pods[s.instance_type], s.gpus_per_replica, 1, s.min_replicas, s.replicas, s.max_replicas)
        spread[s.instance_type] = max(spread[s.instance_type], s.min_replicas if s.spread_zones else 1)
        workloads[s.instance_type].append(s.name)
    for p in llms:
        if p.name in llm_servers:
            continue
        _add(pods[p.instance_type], p.gpus_per_pod, p.nodes_per_replica, p.min_replicas, p.replicas, p.max_replicas)
        spread[p.instance_type] = max(spread[p.instance_type], p.min_replicas * p.nodes_per_replica if p.spread_zones else 1)
        workloads[p.instance_type].append(p.name)
    groups = []
    for instance_type in sorted(pods):
        inst = catalogue.instances[instance_type]
        sizes = {k: max(nodes_for_pods(v, inst.gpus), spread[instance_type] if k != "min" or v.total() else 0)
                 for k, v in pods[instance_type].items()}
        groups.append(NodeGroupPlan.model_construct(  # root_volume comes once the plan exists
            name=node_group_name(instance_type, env.capacity_type), instance_type=instance_type,
            capacity_type=env.capacity_type, min_size=sizes["min"], desired_size=sizes["desired"],
            max_size=sizes["max"], gpus_per_node=inst.gpus, gpu_memory_gib=inst.gpu_memory_gib,
            gpu_model=inst.gpu.name, vcpu=inst.vcpu, ram_gib=inst.ram_gib,
            workloads=tuple(sorted(workloads[instance_type]))))
    return tuple(groups)


def _add(bucket: dict[str, Counter[int]], gpus: int, pods_per_replica: int, lo: int, desired: int, hi: int) -> None:
    for key, count in (("min", lo), ("desired", desired), ("max", hi)):
        bucket[key][gpus] += count * pods_per_replica
