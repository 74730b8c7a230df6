"""The classic (Triton) models of one environment: which run on CPU nodes (triton/devices.py, triton/cpu_classic.py), the GPU
instance type the others' servers run on, the servers, each model's plan, and the pipelines (ensembles) on
those servers."""

from __future__ import annotations

import dataclasses
import math

from ...errors import Issue
from ...spec.environment import EnvironmentSpec
from ...spec.lock import StackLock
from ...spec.models import ClassicModelSpec
from ...spec.pipelines import PipelineSpec
from .bounds import elsewhere
from .built_for import built_for_issues, image_for, tensorrt_of
from ..serving.engine_args import server_observability, triton_server_args
from ..hardware.instances import InstanceCatalogue
from ..names import node_group_name
from ..rejection import Rejection
from .cpu_classic import compile_cpu
from .devices import choose_devices
from .packing.choice import Unpacked, gpu_placements
from .packing.gpu import PYTHON_SHM_BYTES, ClassicPlacement, on_demand_base_nodes, pack_on
from .packing.locked import locked_gpu_placements
from ..lock import pinned_device
from .pipelines import binding_pipelines, budget_decision, pipeline_plan, size_on, step_decision
from .rate_limiter import SERVER_FLAGS as RATE_LIMIT_FLAGS
from .rate_limiter import rate_limit
from ..capacity.rollout import resolve_rollout, workload_rollout
from ..sizing import replica_floor
from .model import Where, triton_model_plan
from .policy import EXECUTIONS_IN_WORST_CASE, check_budget, within_budget
from ..types import Alternative, Decision, PipelinePlan, TritonModelPlan, TritonServerPlan, Warning_

# The next cheapest instance types a GPU decision prices exactly (the plan's text lists as many); the others
# it prices by a lower bound, unpacked (packing/choice.py).
PRICED_ALTERNATIVES = 4
Indexed = tuple[int, ClassicModelSpec]
IndexedPipeline = tuple[int, PipelineSpec]


def _idle_room(placement: ClassicPlacement) -> str:
    if placement.usd_per_hour >= placement.standalone_usd_per_hour - 1e-9:
        return ""
    return f" ({placement.standalone_usd_per_hour:.2f} on nodes of their own; cheaper beside the LLMs there)"


def _reserved(placement: ClassicPlacement, env: EnvironmentSpec) -> str:
    if not any(r.instance_type == placement.instance.name for r in env.capacity_reservations):
        return ""
    return ", a reserved node's instance-hour paid already"


def _base(placement: ClassicPlacement, env: EnvironmentSpec) -> str:
    base = on_demand_base_nodes(env, list(placement.servers), placement.instance)
    return f", {base} of them on-demand: the availability floors spot cannot carry" if base else ""


def _choice(chosen: ClassicPlacement, fits: list[ClassicPlacement], results: list, env: EnvironmentSpec) -> Decision:
    return Decision(
        choice=chosen.instance.name,
        reason=f"cheapest way to host every Triton model: {len(chosen.servers)} server(s) packed onto "
               f"{chosen.nodes[1]} node(s) = {chosen.usd_per_hour:.2f} USD/h (each node at its {env.capacity_type} price "
               f"with its root volume{_reserved(chosen, env)}{_base(chosen, env)}, as the cost preview prices it)"
               + _idle_room(chosen),
        rejected=tuple(Alternative(option=r.instance.name, reason=f"costs {r.usd_per_hour:.2f} USD/h on {r.nodes[1]} node(s)"
                                   + _idle_room(r), usd_per_hour=round(r.usd_per_hour, 4)) for r in fits[1:])
        + tuple(Alternative(option=r.option, reason=r.reason) for r in results if isinstance(r, Rejection))
        + tuple(Alternative(option=r.option, reason=r.reason) for r in sorted(
            (r for r in results if isinstance(r, Unpacked)), key=lambda r: (r.usd_floor, r.instance.name))))


Compiled = tuple[list[TritonModelPlan], list[TritonServerPlan], list[PipelinePlan]]


def compile_classic(classic: list[Indexed], pipelines: list[IndexedPipeline], env: EnvironmentSpec,
                    catalogue: InstanceCatalogue, issues: list[Issue], warnings: list[Warning_],
                    in_use: dict[str, tuple[int, int]], lock: StackLock | None = None,
                    fresh: frozenset[str] = frozenset()) -> Compiled:
    """The CPU models on their CPU node group, the others packed onto GPUs; a pipeline runs where its steps do."""
    if not classic:
        return [], [], []
    problems = built_for_issues(classic, env, catalogue)
    if problems:
        issues.extend(problems)
        return [], [], []
    devices = choose_devices(classic, [p for _, p in pipelines], env, catalogue, in_use, issues)
    if lock is not None and _devices_moved(devices.cpu, classic, lock, fresh, catalogue):
        # a model the change does not name stays on the side (CPU or GPU nodes) the lock has it
        classic = [(i, m if m.name in fresh else pinned_device(m, lock, catalogue.cpu_instances)) for i, m in classic]
        devices = choose_devices(classic, [p for _, p in pipelines], env, catalogue, in_use, issues)
    on_cpu = [(i, m) for i, m in classic if m.name in devices.cpu]
    cpu_pipes = [(i, p) for i, p in pipelines if set(p.step_models()) <= devices.cpu]
    gpu = _compile_gpu([(i, m) for i, m in classic if m.name not in devices.cpu],
                       [ip for ip in pipelines if ip not in cpu_pipes], env, catalogue, issues, warnings, in_use,
                       devices.decisions, lock, fresh)
    cpu = compile_cpu(on_cpu, cpu_pipes, env, catalogue, issues, warnings, devices,
                      _locked_cpu_type(on_cpu, lock, fresh, catalogue) if lock else None)
    _unmatched_former_names(gpu[1] + cpu[1], env, warnings)
    return gpu[0] + cpu[0], gpu[1] + cpu[1], gpu[2] + cpu[2]


def _locked_cpu_type(on_cpu: list[Indexed], lock: StackLock, fresh: frozenset[str],
                     catalogue: InstanceCatalogue) -> str | None:
    """The CPU type the lock has most of the unchanged CPU models on (then by name); None: none is locked."""
    types = [lock.classic[m.name].instance_type for _, m in on_cpu if m.name in lock.classic and m.name not in fresh]
    types = [t for t in types if t in catalogue.cpu_instances]
    return min(set(types), key=lambda t: (-types.count(t), t)) if types else None


def _devices_moved(cpu: frozenset[str], classic: list[Indexed], lock: StackLock, fresh: frozenset[str],
                   catalogue: InstanceCatalogue) -> bool:
    locked = {m.name: lock.classic[m.name].instance_type in catalogue.cpu_instances for _, m in classic
              if m.name in lock.classic and m.name not in fresh}
    return any((name in cpu) != on_cpu for name, on_cpu in locked.items())


def _unmatched_former_names(servers: list[TritonServerPlan], env: EnvironmentSpec, warnings: list[Warning_]) -> None:
    """A deploy.formerServerNames entry that is no server's former name keeps nothing: a typo, or a server
    since removed. Said, so that a rename the stack meant to keep free is not replaced in silence."""
    former = {n for s in servers for n in s.former_names}
    for name in env.deploy.former_server_names:
        if name not in former:
            known = ", ".join(sorted(former)) or "none"
            warnings.append(Warning_(model="deploy.formerServerNames", message=f"{name} is no server's former name "
                                     f"(the servers' former names: {known}): it keeps nothing; remove it, or "
                                     "correct it"))


def _compile_gpu(classic: list[Indexed], pipelines: list[IndexedPipeline], env: EnvironmentSpec,
                 catalogue: InstanceCatalogue, issues: list[Issue], warnings: list[Warning_],
                 in_use: dict[str, tuple[int, int]], chosen_devices: dict[str, Decision],
                 lock: StackLock | None = None, fresh: frozenset[str] = frozenset()) -> Compiled:
    if not classic:
        return [], [], []
    specs = [m for _, m in classic]
    pipes = tuple(p for _, p in pipelines)
    fits, results = gpu_placements(specs, pipes, env, catalogue, in_use, exact=1 + PRICED_ALTERNATIVES)
    locked = locked_gpu_placements(specs, pipes, env, catalogue, in_use, lock, fresh, warnings) if lock else None
    if locked is not None and not (fits and _same_servers(locked, fits[0])):
        placements = [(p, _locked_choice(p)) for p in locked]
    elif not fits:
        issues.extend(_classic_infeasible(classic, pipelines, env, catalogue, results))
        return [], [], []
    else:  # no lock, or it keeps what a fresh solve chooses: the fresh plan, with its reasons
        placements = [(fits[0], _choice(fits[0], fits, results, env))]
    plans: list[TritonModelPlan] = []
    servers: list[TritonServerPlan] = []
    for chosen, decision in placements:
        on = {n for s in chosen.servers for n in s.models}
        mine = [(i, m) for i, m in classic if m.name in on]
        more_plans, more_servers = _servers_on(chosen, decision, mine, [ip for ip in pipelines if set(
            ip[1].step_models()) <= on], env, issues, warnings, chosen_devices)
        plans += more_plans
        servers += more_servers
    chosen = placements[0][0]
    on = {n for s in chosen.servers for n in s.models}
    mine_pipes = [ip for ip in pipelines if set(ip[1].step_models()) <= on]
    return plans, servers, _pipeline_plans(mine_pipes, chosen, [m for m in specs if m.name in on], env, catalogue,
                                           in_use, plans, issues)


def _same_servers(locked: list[ClassicPlacement], fresh: ClassicPlacement) -> bool:
    return len(locked) == 1 and locked[0].instance.name == fresh.instance.name and [
        (s.name, s.models) for s in locked[0].servers] == [(s.name, s.models) for s in fresh.servers]


def _locked_choice(chosen: ClassicPlacement) -> Decision:
    return Decision(choice=chosen.instance.name,
                    reason=f"kept by the placement lock (modelfleet.lock.yaml): {len(chosen.servers)} server(s) on "
                           f"{chosen.nodes[1]} node(s) = {chosen.usd_per_hour:.2f} USD/h; the models a change names "
                           "join them where they fit; `modelfleet plan --repack` shows the global optimum")


def _servers_on(chosen: ClassicPlacement, decision: Decision, classic: list[Indexed],
                pipelines: list[IndexedPipeline], env: EnvironmentSpec, issues: list[Issue],
                warnings: list[Warning_], chosen_devices: dict[str, Decision]) -> tuple[list, list]:
    """Each model's plan and each server's, for the servers of one placement."""
    pipes = tuple(p for _, p in pipelines)
    group = node_group_name(chosen.instance.name, env.capacity_type)
    plans, servers = [], []
    index = {m.name: i for i, m in classic}
    own, pipes_list = {m.name: m for _, m in classic}, list(pipes)
    binding = binding_pipelines(pipelines, chosen.specs, chosen.budgets)
    where = Where(chosen.instance.name, chosen.instance.gpu_memory_gib, group)
    overridden = {n for n, m in own.items() if m.overrides.queue_timeout_us is not None}
    for packed in chosen.servers:
        members, limiter = rate_limit([
            triton_model_plan(chosen.specs[n], index[n], packed, chosen.sizings[n], where, issues, warnings,
                              binding.get(n), _extra(chosen_devices.get(n), step_decision(
                                  own[n], chosen.specs[n], pipes_list, chosen.budgets)))
            for n in packed.models], overridden)
        plans += members
        flags = RATE_LIMIT_FLAGS if any(m.rate_limiter_priority for m in members) else ()
        servers.append(TritonServerPlan(
            name=packed.name, node_group=group, instance_type=chosen.instance.name, replicas=packed.replicas,
            min_replicas=packed.min_replicas, max_replicas=packed.max_replicas, spread_zones=packed.spread_zones,
            gpus_per_replica=1, models=packed.models, gpu_memory_used_gib=packed.gpu_memory_used_gib,
            gpu_compute_used=packed.gpu_compute_used, cache_size_bytes=packed.cache_size_bytes,
            memory_request_gib=packed.memory_request_gib,
            # the flag is one stub's arena; python_shm_bytes counts every stub's
            args=triton_server_args(env.triton.exit_timeout_secs, packed.cache_size_bytes,
                                    PYTHON_SHM_BYTES if packed.python_shm_bytes else 0,
                                    server_observability(env, packed.name, decoupled=any(
                                        chosen.specs[n].streaming for n in packed.models))) + flags,
            image=image_for(next(filter(None, (tensorrt_of(own[n]) for n in packed.models)), None), env.triton.image),
            python_shm_bytes=packed.python_shm_bytes, decision=decision, rate_limiter=limiter,
            former_names=() if packed.former_name == packed.name else (packed.former_name,),
            physical_name=packed.former_name if packed.former_name in env.deploy.former_server_names else packed.name,
            rollout=workload_rollout([resolve_rollout(own[n].rollout, env) for n in packed.models], env,
                                     (packed.min_replicas, packed.replicas, packed.max_replicas),
                                     replica_floor(env, max(own[n].sla.availability for n in packed.models)),
                                     1, chosen.instance.name)))
    return plans, servers


def _extra(*decisions: Decision | None) -> tuple[Decision, ...]:
    return tuple(d for d in decisions if d is not None)


def _pipeline_plans(pipelines: list[IndexedPipeline], chosen: ClassicPlacement, specs: list[ClassicModelSpec],
                    env: EnvironmentSpec, catalogue: InstanceCatalogue, in_use: dict[str, tuple[int, int]],
                    plans: list[TritonModelPlan], issues: list[Issue]) -> list[PipelinePlan]:
    if not pipelines:
        return []
    by_name = {p.name: p for p in plans}
    kept = _together_decision(chosen, specs, tuple(p for _, p in pipelines), env, catalogue, in_use)
    out = []
    for i, pipeline in pipelines:
        budgets = chosen.budgets[pipeline.name]
        split = budget_decision(pipeline, budgets, chosen.sizings, chosen.instance.gpu.name)
        plan = pipeline_plan(pipeline, i, by_name, budgets, (split, kept), issues)
        if plan is not None:
            out.append(plan)
    return out


def _together_decision(chosen: ClassicPlacement, specs: list[ClassicModelSpec], pipes: tuple[PipelineSpec, ...],
                       env: EnvironmentSpec, catalogue: InstanceCatalogue,
                       in_use: dict[str, tuple[int, int]]) -> Decision:
    """What keeping each pipeline's steps on one server costs: the same instance type packed freely."""
    free = pack_on(specs, env, catalogue, chosen.instance, in_use.get(chosen.instance.name, (0, 0)), {}, pipes,
                   keep_together=False)
    extra = chosen.usd_per_hour - free.usd_per_hour if isinstance(free, ClassicPlacement) else 0.0
    cost = (f"it costs {extra:.2f} USD/h more than packing them freely on {chosen.instance.name}" if extra > 1e-9 else
            f"it costs nothing here: packed freely, {chosen.instance.name} needs the same nodes")
    return Decision(choice="steps on one server",
                    reason="an ensemble calls its steps inside one tritonserver, passing tensors in memory (no network "
                           "hop between steps), so the packing treats a pipeline's steps as one unit; " + cost)


def _classic_infeasible(classic: list[Indexed], pipelines: list[IndexedPipeline], env: EnvironmentSpec,
                        catalogue: InstanceCatalogue, results: list) -> list[Issue]:
    """Why no instance type hosts the Triton models: per model when its SLA (or its pipeline's share) is too
    tight even on the fastest allowed GPU (the fix is in that SLA), else one issue with the instance types'
    reasons."""
    instances = catalogue.in_families(env.instance_families)
    if instances:
        # the fastest by peak, then by bandwidth (an H200 reads weights faster than an H100 of the same peak)
        fastest = max(instances, key=lambda i: (i.gpu.fp16_tflops, i.gpu.memory_bandwidth_gbs or 0, i.name)).gpu
        sized = size_on([m for _, m in classic], [p for _, p in pipelines], fastest, catalogue,
                        env.triton.target_utilization)
        tight = [_pipeline_tight(pipelines, sized, m.name) or _with_elsewhere(
                     check_budget(sized.specs[m.name], sized.sizings[m.name], i), sized.sizings[m.name], sized.specs[m.name],
                     {i.family: i.gpu for i in catalogue.instances.values() if i.family not in env.instance_families})
                 for i, m in classic if not within_budget(sized.specs[m.name], sized.sizings[m.name])]
        if tight:
            return sorted(set(tight))
    reasons = "; ".join(sorted({r.reason for r in results})[:3]) or "no instance families allowed"
    return [Issue("", 0, 0, "models", f"no allowed instance type can host the Triton models: {reasons}",
                  "allow a family with larger GPUs (e.g. g6e) or declare smaller models")]


def _with_elsewhere(issue: Issue | None, sizing, model: ClassicModelSpec, others: dict) -> Issue | None:
    """A datasheet-bound issue's fix, completed with the families the stack does not allow that would do."""
    if issue is None or sizing.measured or sizing.bound is None or "datasheet bound" not in issue.message:
        return issue
    hint = elsewhere(sizing.bound, model.sla.p99_latency_ms, EXECUTIONS_IN_WORST_CASE, others)
    return dataclasses.replace(issue, fix=issue.fix + hint)


def _pipeline_tight(pipelines: list[IndexedPipeline], sized, model: str) -> Issue | None:
    """A step whose share of a pipeline's p99 leaves no time to queue: the pipeline's p99 is what to fix."""
    for i, pipeline in pipelines:
        for budget in sized.budgets.get(pipeline.name, ()):
            if budget.model == model and sized.specs[model].sla.p99_latency_ms == budget.budget_ms:
                total = sum(b.compute_ms for b in sized.budgets[pipeline.name])
                return Issue("", 0, 0, f"pipelines[{i}].sla.p99_latency_ms",
                             f"{pipeline.name}: p99 {pipeline.sla.p99_latency_ms:g} ms leaves {model} {budget.budget_ms:g} "
                             f"ms (its share, in proportion to its {budget.compute_ms:g} ms batch), no more than "
                             f"{EXECUTIONS_IN_WORST_CASE} executions of it: no time to queue",
                             f"raise the pipeline's p99 above {math.ceil(EXECUTIONS_IN_WORST_CASE * total + 1)} ms")
    return None
