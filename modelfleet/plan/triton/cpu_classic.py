"""The classic models placed on CPU nodes (triton/devices.py): their KIND_CPU servers on the cheapest allowed CPU
type (triton/cpu_placement.py), each model's plan, and the ensembles of pipelines whose steps all run there."""

from __future__ import annotations

from ...errors import Issue
from ...spec.environment import EnvironmentSpec
from ...spec.models import ClassicModelSpec
from ...spec.pipelines import PipelineSpec
from .cpu_placement import TRITON_CPU_OVERHEAD_CORES, CpuPlacement, CpuServer, cpu_placements
from .devices import Devices
from ..serving.engine_args import server_observability, triton_server_args
from ..hardware.instances import InstanceCatalogue
from ..rejection import Rejection
from ..names import node_group_name
from .packing.gpu import PYTHON_SHM_BYTES
from .pipelines import binding_pipelines, budget_decision, pipeline_plan, step_decision
from ..capacity.rollout import resolve_rollout, workload_rollout
from ..sizing import on_demand_replicas, replica_floor
from .model import Where, triton_model_plan
from ..types import Alternative, Decision, PipelinePlan, TritonModelPlan, TritonServerPlan, Warning_

Indexed = tuple[int, ClassicModelSpec]
IndexedPipeline = tuple[int, PipelineSpec]


def _base(placement: CpuPlacement, env: EnvironmentSpec) -> str:
    base = sum(on_demand_replicas(env, s.min_replicas) for s in placement.servers)
    return f", {base} of them on-demand: the availability floors spot cannot carry" if base else ""


def _choice(chosen: CpuPlacement, fits: list[CpuPlacement], rejected: list[Rejection], env: EnvironmentSpec) -> Decision:
    return Decision(
        choice=chosen.instance.name,
        reason=f"cheapest CPU type for the KIND_CPU models: {len(chosen.servers)} server(s), one pod per node, on "
               f"{chosen.nodes[1]} node(s) = {chosen.usd_per_hour:.2f} USD/h (each node at its {env.capacity_type} "
               f"price with its root volume{_base(chosen, env)}, as the cost preview prices it); the figures measured on a "
               f"{chosen.instance.processor.code_name} hold on it",
        rejected=tuple(Alternative(option=f.instance.name, reason=f"costs {f.usd_per_hour:.2f} USD/h on {f.nodes[1]} "
                                   "node(s)", usd_per_hour=round(f.usd_per_hour, 4)) for f in fits[1:])
        + tuple(Alternative(option=r.option, reason=r.reason) for r in rejected))


def _instances(name: str, server: CpuServer, chosen: CpuPlacement, env: EnvironmentSpec) -> Decision:
    """How many KIND_CPU instances, from the node's vCPUs and the model's load."""
    figures, count = chosen.figures[name], server.counts[name]
    load = chosen.specs[name].sla.peak_rps / (figures.rps_per_instance * env.triton.target_utilization)
    used = sum(c * chosen.figures[n].vcpu_per_instance for n, c in server.counts.items())
    return Decision(choice=f"KIND_CPU x {count}",
                    reason=f"{count} instance(s) of {figures.vcpu_per_instance} vCPU on each of {server.replicas} "
                           f"{chosen.instance.name} replica(s): its peak keeps {load:.2f} instances busy at "
                           f"{env.triton.target_utilization:.0%} of {figures.rps_per_instance:g} req/s each; the "
                           f"server's {server.cores} usable vCPUs (the node's allocatable less the DaemonSet "
                           f"allowance and Triton's own {TRITON_CPU_OVERHEAD_CORES:g}) hold {used} of them, the "
                           "cores left over after every model's load became instances (headroom for bursts)")


def _server_plan(server: CpuServer, chosen: CpuPlacement, group: str, decision: Decision, env: EnvironmentSpec,
                 specs: dict[str, ClassicModelSpec]) -> TritonServerPlan:
    return TritonServerPlan(
        name=server.name, node_group=group, instance_type=chosen.instance.name, replicas=server.replicas,
        min_replicas=server.min_replicas, max_replicas=server.max_replicas, spread_zones=server.spread_zones,
        gpus_per_replica=0, models=server.models, gpu_memory_used_gib=0.0, gpu_compute_used=0.0,
        cache_size_bytes=server.cache_size_bytes, memory_request_gib=server.memory_request_gib,
        args=triton_server_args(env.triton.exit_timeout_secs, server.cache_size_bytes,
                                PYTHON_SHM_BYTES if server.python_shm_bytes else 0,
                                server_observability(env, server.name,
                                                     decoupled=any(specs[n].streaming for n in server.models))),
        image=env.triton.image, python_shm_bytes=server.python_shm_bytes, decision=decision, device="cpu",
        rollout=workload_rollout([resolve_rollout(specs[n].rollout, env) for n in server.models], env,
                                 (server.min_replicas, server.replicas, server.max_replicas),
                                 replica_floor(env, max(specs[n].sla.availability for n in server.models)), 1,
                                 chosen.instance.name, cpu=True))


def compile_cpu(cpu: list[Indexed], pipelines: list[IndexedPipeline], env: EnvironmentSpec,
                catalogue: InstanceCatalogue, issues: list[Issue], warnings: list[Warning_],
                devices: Devices, locked: str | None = None) -> tuple[list[TritonModelPlan], list[TritonServerPlan],
                                                                    list[PipelinePlan]]:
    """``locked``: the CPU instance type the placement lock keeps the CPU models on, while it holds them all."""
    if not cpu:
        return [], [], []
    fits, rejected = cpu_placements([m for _, m in cpu], [p for _, p in pipelines], env, catalogue)
    if not fits:
        issues.extend(_infeasible(cpu, rejected))
        return [], [], []
    kept = next((f for f in fits if f.instance.name == locked), None)
    if locked is not None and kept is None:
        why = next((r.reason for r in rejected if r.option == locked), f"{locked} is no longer allowed")
        warnings.extend(Warning_(model=m.name, message=f"re-placed despite the placement lock: the CPU models no "
                                 f"longer fit their locked {locked} ({why}); on {fits[0].instance.name} now")
                        for _, m in cpu)
    chosen = kept or fits[0]
    group = node_group_name(chosen.instance.name, env.capacity_type, cpu=True)
    decision = _choice(chosen, fits, rejected, env) if chosen is fits[0] else Decision(
        choice=chosen.instance.name, reason=f"kept by the placement lock (modelfleet.lock.yaml): {chosen.nodes[1]} "
        f"node(s) = {chosen.usd_per_hour:.2f} USD/h, where {fits[0].instance.name} would cost "
        f"{fits[0].usd_per_hour:.2f}; `modelfleet plan --repack` shows the global optimum")
    where = Where(chosen.instance.name, 0.0, group)
    index, own = {m.name: i for i, m in cpu}, {m.name: m for _, m in cpu}
    binding = binding_pipelines(pipelines, chosen.specs, chosen.budgets)
    plans, servers = [], []
    for server in chosen.servers:
        for name in server.models:
            extra = (devices.decisions.get(name), _instances(name, server, chosen, env),
                     step_decision(own[name], chosen.specs[name], [p for _, p in pipelines], chosen.budgets))
            plans.append(triton_model_plan(
                chosen.specs[name], index[name], server, chosen.sizings[name], where, issues, warnings,
                binding.get(name), tuple(d for d in extra if d is not None), device="cpu",
                cpu_cores=server.counts[name] * chosen.figures[name].vcpu_per_instance,
                gpu_placement_usd_per_hour=_rounded(devices.gpu_usd_per_hour.get(name))))
        servers.append(_server_plan(server, chosen, group, decision, env, own))
    return plans, servers, _pipeline_plans(pipelines, chosen, plans, issues)


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def _pipeline_plans(pipelines: list[IndexedPipeline], chosen: CpuPlacement, plans: list[TritonModelPlan],
                    issues: list[Issue]) -> list[PipelinePlan]:
    by_name, out = {p.name: p for p in plans}, []
    for i, pipeline in pipelines:
        budgets = chosen.budgets[pipeline.name]
        split = budget_decision(pipeline, budgets, chosen.sizings, f"{chosen.instance.processor.code_name} CPU")
        kept = Decision(choice="steps on one server", reason="an ensemble calls its steps inside one tritonserver; "
                        "a pool's CPU models share one server, so the steps are on it already")
        plan = pipeline_plan(pipeline, i, by_name, budgets, (split, kept), issues)
        if plan is not None:
            out.append(plan)
    return out


def _infeasible(cpu: list[Indexed], rejected: list[Rejection]) -> list[Issue]:
    """No allowed CPU type hosts the CPU models: one issue per model placed there, at its ``device``."""
    reasons = "; ".join(sorted({r.reason for r in rejected})[:3]) or "no CPU instance family allowed"
    return [Issue("", 0, 0, f"models[{i}].device", f"{m.name}: no allowed CPU instance type can host the KIND_CPU "
                  f"models: {reasons}", "allow a larger or another CPU family in modelfleet:instanceFamilies, measure "
                  "profile.cpu on a family the stack allows, or drop device: cpu") for i, m in cpu]
