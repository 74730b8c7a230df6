"""Pipelines (Triton ensembles): which run in an environment, their load on the steps, and the p99 split.

The budget split (docs/triton-features.md), per GPU model the steps could run on:

    c_i            a full batch's execution of step i on that GPU (its sizing at its own SLA)
    b_i            = L x c_i / sum(c)          the pipeline's p99 L split in proportion to compute
    step p99       = min(its own p99, b_i)     over every pipeline it is a step of
    queue timeout  = step p99 - 2 x c_i'       the usual derivation (triton_policy), at the step p99,
                                               c_i' its batch's time once re-sized to that p99

Why in proportion to compute: each step's worst answered request is its queue timeout plus two
executions (the one in progress and its own); splitting L so, every step keeps the same fraction of its
share to queue in (b_i - 2 c_i = c_i (L / sum(c) - 2)), and the pipeline is feasible exactly when
L > 2 x sum(c). Re-sizing at the tighter p99 can only shrink a step's batch (and its c_i), never stretch
it past b_i. The sum of the steps' worst cases is then at most L; the ensemble scheduler's own hand-off
between steps (in-process, no network) is not in it.

Load: a step carries its own ``sla.peak_rps`` plus every pipeline's it is in (each pipeline request runs
each step once), so its queue bound, compute share and replicas count both.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import Issue
from ...spec.models import ClassicModelSpec, FleetSpec
from ...spec.pipelines import PipelineSpec, apply_pipeline_environment
from ..hardware.instances import GpuType, InstanceCatalogue
from .policy import EXECUTIONS_IN_WORST_CASE, ClassicSizing, size_classic
from .tensors import tensors
from ..types import Decision, PipelinePlan, PipelineStepPlan, TritonModelPlan

Indexed = tuple[int, PipelineSpec]


def pipelines_in(fleet: FleetSpec, environment: str, models: dict[str, ClassicModelSpec],
                 issues: list[Issue], llms: frozenset[str] = frozenset()) -> list[Indexed]:
    """The pipelines running in ``environment``: patched, enabled, and with every step there (else an issue);
    ``llms``: the LLMs planned there (a step may be one, plan/triton/llm_steps.py)."""
    out = []
    for index, pipeline in enumerate(fleet.pipelines):
        applied = apply_pipeline_environment(pipeline, environment)
        if applied is None:
            continue
        missing = [m for m in applied.step_models() if m not in models and m not in llms]
        if missing:
            issues.append(Issue("", 0, 0, f"pipelines[{index}].steps", f"{pipeline.name}: step(s) "
                                f"{', '.join(missing)} are not in stack {environment} (disabled there)",
                                f"disable the pipeline there too (environments: {{{environment}: {{enabled: false}}}})"))
            continue
        out.append((index, applied))
    return sorted(out, key=lambda pair: pair[1].name)


@dataclass(frozen=True)
class StepBudget:
    """One step's part of one pipeline's p99 on one GPU model."""

    pipeline: str
    model: str
    compute_ms: float  # at its own SLA, which the split is proportional to
    budget_ms: float  # b_i


def split_budget(pipeline: PipelineSpec, sizings: dict[str, ClassicSizing]) -> tuple[StepBudget, ...]:
    total = sum(sizings[m].compute_ms for m in pipeline.step_models())
    return tuple(StepBudget(pipeline.name, m, sizings[m].compute_ms,
                            round(pipeline.sla.p99_latency_ms * sizings[m].compute_ms / total, 1))
                 for m in pipeline.step_models())


def effective_spec(model: ClassicModelSpec, pipelines: list[PipelineSpec],
                   budgets: dict[str, tuple[StepBudget, ...]]) -> ClassicModelSpec:
    """The model's SLA as its servers must meet it: its own load plus its pipelines', at the tighter p99."""
    mine = [p for p in pipelines if model.name in p.step_models()]
    if not mine:
        return model
    shares = [b.budget_ms for p in mine for b in budgets[p.name] if b.model == model.name]
    sla = model.sla.model_copy(update={"peak_rps": model.sla.peak_rps + sum(p.sla.peak_rps for p in mine),
                                       "p99_latency_ms": min([model.sla.p99_latency_ms, *shares])})
    return model.model_copy(update={"sla": sla})


@dataclass(frozen=True)
class PipelineSizing:
    """Every classic model on one GPU model, with the pipelines applied."""

    specs: dict[str, ClassicModelSpec]  # as the servers must serve them (effective_spec)
    sizings: dict[str, ClassicSizing]
    budgets: dict[str, tuple[StepBudget, ...]]  # pipeline -> its steps' budgets


def size_on(models: list[ClassicModelSpec], pipelines: list[PipelineSpec], gpu: GpuType,
            catalogue: InstanceCatalogue, target_utilization: float) -> PipelineSizing:
    """Size each model at its own SLA, split the pipelines' budgets, then re-size the steps at theirs."""
    own = {m.name: size_classic(m, gpu, catalogue, target_utilization) for m in models}
    budgets = {p.name: split_budget(p, own) for p in pipelines}
    specs = {m.name: effective_spec(m, pipelines, budgets) for m in models}
    sizings = {name: own[name] if specs[name] is model else size_classic(specs[name], gpu, catalogue,
                                                                          target_utilization)
               for name, model in ((m.name, m) for m in models)}
    return PipelineSizing(specs, sizings, budgets)


def together(pipelines: list[PipelineSpec]) -> tuple[tuple[str, ...], ...]:
    """Groups of models that must share a server: each pipeline's steps, pipelines sharing a step merged."""
    groups: list[set[str]] = []
    for pipeline in pipelines:
        members = set(pipeline.step_models())
        touching = [g for g in groups if g & members]
        for group in touching:
            members |= group
            groups.remove(group)
        groups.append(members)
    return tuple(sorted(tuple(sorted(g)) for g in groups if len(g) > 1))


def budget_decision(pipeline: PipelineSpec, budgets: tuple[StepBudget, ...], sizings: dict[str, ClassicSizing],
                    gpu_name: str) -> Decision:
    """How the pipeline's p99 was split on the chosen GPU, and what each step's queue timeout became."""
    total = sum(b.compute_ms for b in budgets)
    parts = "; ".join(f"{b.model} {b.budget_ms:g} ms (batch {b.compute_ms:.1f} ms of {total:.1f}, queue timeout "
                      f"{sizings[b.model].queue_timeout_us / 1000:g} ms)" for b in budgets)
    return Decision(
        choice="p99 " + " + ".join(f"{b.budget_ms:g}" for b in budgets) + f" = {pipeline.sla.p99_latency_ms:g} ms",
        reason=f"the pipeline's p99 {pipeline.sla.p99_latency_ms:g} ms is split across its steps in proportion to "
               f"a full batch's time on a {gpu_name} (its measured or assumed compute_ms): {parts}. Each step "
               f"answers within its share when queued at most its timeout and then {EXECUTIONS_IN_WORST_CASE} "
               "executions; a step also called directly keeps the tighter of its own p99 and its share")


def ensemble_tensor(pipeline: PipelineSpec, model: str, output: str) -> str:
    """The ensemble's name for a step output: the pipeline output it is returned as, else <model>.<output>."""
    exported = next((o.name for o in pipeline.outputs if o.from_ == f"{model}.{output}"), None)
    return exported or f"{model}.{output}"


def run_order(pipeline: PipelineSpec) -> tuple[str, ...]:
    """The steps in an order that runs (each after the steps it reads), otherwise as written."""
    needs = {s.model: {ref.partition(".")[0] for ref in s.inputs.values() if "." in ref} & set(pipeline.step_models())
             for s in pipeline.steps}
    order: list[str] = []
    while len(order) < len(needs):
        order.append(next(m for m in pipeline.step_models() if m not in order and needs[m] <= set(order)))
    return tuple(order)


def _called_version(named: int | None, served: tuple[int, ...] | None) -> int:
    """The version an ensemble step calls: named, else the model's one pinned version, else -1 (the latest; the
    spec refuses a model serving several without a name)."""
    if named is not None:
        return named
    return served[0] if served is not None and len(served) == 1 else -1


def pipeline_plan(pipeline: PipelineSpec, index: int, models: dict[str, TritonModelPlan],
                  budgets: tuple[StepBudget, ...], decisions: tuple[Decision, ...],
                  issues: list[Issue]) -> PipelinePlan | None:
    """The ensemble of one pipeline, on the server its steps were packed onto (packing keeps them together)."""
    steps = [models[name] for name in run_order(pipeline)]
    batches = {s.max_batch_size for s in steps}
    if 0 in batches and len(batches) > 1:
        issues.append(Issue("", 0, 0, f"pipelines[{index}].steps", f"{pipeline.name}: some steps batch and some do "
                            f"not ({', '.join(f'{s.name} {s.max_batch_size}' for s in steps)}); an ensemble's "
                            "tensors either all carry a batch dimension or none does",
                            "set overrides.max_batch_size: 0 on every step, or on none"))
        return None
    share = {b.model: b.budget_ms for b in budgets}
    spec_steps = {s.model: s for s in pipeline.steps}
    plans = tuple(PipelineStepPlan(
        model=s.name, input_map=tuple(sorted((k, tensor_of(pipeline, v)) for k, v in spec_steps[s.name].inputs.items())),
        output_map=tuple((t.name, ensemble_tensor(pipeline, s.name, t.name)) for t in s.outputs),
        budget_ms=share[s.name], queue_timeout_us=s.queue_timeout_us,
        model_version=_called_version(spec_steps[s.name].version, s.versions)) for s in steps)
    first = steps[0]
    return PipelinePlan(name=pipeline.name, server=first.server, node_group=first.node_group,
                        instance_type=first.instance_type, max_batch_size=min(batches),
                        inputs=tensors(pipeline.inputs), outputs=tensors(pipeline.outputs), steps=plans,
                        p99_latency_ms=pipeline.sla.p99_latency_ms, peak_rps=pipeline.sla.peak_rps,
                        decisions=decisions, availability=min(s.availability for s in steps), team=pipeline.team)


def tensor_of(pipeline: PipelineSpec, reference: str) -> str:
    """An input reference as the ensemble tensor it names (a pipeline input keeps its own name)."""
    if any(t.name == reference for t in pipeline.inputs):
        return reference
    model, _, output = reference.partition(".")
    return ensemble_tensor(pipeline, model, output)


def step_decision(own: ClassicModelSpec, served: ClassicModelSpec, pipelines: list[PipelineSpec],
                  budgets: dict[str, tuple[StepBudget, ...]]) -> Decision | None:
    """What a step carries for its pipelines, and which p99 it is held to (its own, or a pipeline's share)."""
    mine = [p for p in pipelines if own.name in p.step_models()]
    if not mine:
        return None
    loads = " + ".join(f"{p.sla.peak_rps:g} of pipeline {p.name}" for p in mine)
    shares = ", ".join(f"{b.budget_ms:g} ms of {p.name}'s {p.sla.p99_latency_ms:g} ms" for p in mine
                       for b in budgets[p.name] if b.model == own.name)
    binding = ("its own" if served.sla.p99_latency_ms == own.sla.p99_latency_ms else "its pipeline share")
    return Decision(choice=f"peak {served.sla.peak_rps:g} req/s, p99 {served.sla.p99_latency_ms:g} ms",
                    reason=f"a pipeline step: it carries {own.sla.peak_rps:g} req/s of its own + {loads}; it is held to "
                           f"the tighter of its own p99 {own.sla.p99_latency_ms:g} ms and its share ({shares}): "
                           f"{binding}")


def binding_pipelines(pipelines: list[Indexed], specs: dict[str, ClassicModelSpec],
                      budgets: dict[str, tuple[StepBudget, ...]]) -> dict[str, str]:
    """Model -> the path of the pipeline p99 its budget comes from, where a pipeline's share is tighter than
    its own p99 (a budget problem is then the pipeline's to fix). ``specs``: the models as served."""
    out: dict[str, str] = {}
    for i, pipeline in pipelines:
        for budget in budgets.get(pipeline.name, ()):
            if specs[budget.model].sla.p99_latency_ms == budget.budget_ms and budget.model not in out:
                out[budget.model] = f"pipelines[{i}].sla.p99_latency_ms"
    return out
