"""Which classic models run on CPU nodes (KIND_CPU instances) and which on GPUs, and what each choice costs.

    device: cpu    on a CPU node group, whatever it costs (the plan and the cost preview say what the GPUs
                   would have cost instead)
    device: gpu    on a GPU
    unset          on a GPU, unless the model is a *candidate* and a CPU is cheaper within its SLA

A candidate is a tabular model or a python-backend model (pre- and post-processing, feature code: work a CPU
core does about as fast as a GPU, where a GPU mostly waits) with a measured ``profile.cpu``, an onnx, pytorch
or python framework (CPU threads the compiler can set), not a pipeline step (an ensemble runs its steps in one
server, so moving one step moves them all: the pipeline's owner says that with ``device: cpu`` on every step)
and not ``dedicated_gpu``. The compiler never moves an unmeasured model: the CPU figures would be guesses.

Cheaper: the stack's cost is the cheapest packing of the GPU models onto the allowed GPU types plus the
cheapest placement of the CPU models onto the allowed CPU types (triton/cpu_placement.py), both at the ranking prices
(hardware/node_price.py: node-hours at the stack's capacity type with their root volumes, as the cost preview prices
them). Of every way to split the candidates between the two sides, the cheapest wins (then the one with
fewer models on CPUs, then by name): up to EXACT_CANDIDATES candidates, every split is priced. Both sides'
costs only grow as models are added (the GPU packing is optimal; a CPU placement needs at least the cores and
replicas it needed before), so the cheapest split's cost does too: adding a model never lowers the stack's
cost (tests/cost/test_monotone.py). Beyond that many candidates they are decided one at a time, in name
order, each against the choices before it, which keeps the compile fast but not that guarantee.
Within the SLA: a CPU placement exists only where every model's p99 leaves a queueing budget at its CPU
compute time (the queue derivation of triton_policy), so a candidate too slow on a CPU stays on the GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...errors import Issue
from ...spec.environment import EnvironmentSpec
from ...spec.models import ClassicModelSpec
from ...spec.pipelines import PipelineSpec
from ...spec.triton_options import CPU_FRAMEWORKS
from .cpu_placement import cpu_placements
from ..hardware.instances import InstanceCatalogue
from .packing.choice import gpu_placements
from ..types import Alternative, Decision

Indexed = tuple[int, ClassicModelSpec]
EXACT_CANDIDATES = 6  # every split priced: 2^6 = 64 GPU packings at most (each set priced once)


@dataclass(frozen=True)
class Devices:
    cpu: frozenset[str]  # models placed on CPU nodes
    decisions: dict[str, Decision] = field(default_factory=dict)  # why, for every model that had a choice
    # CPU model -> what it would add to the GPU placement instead, USD/h (None: no GPU placement holds it)
    gpu_usd_per_hour: dict[str, float | None] = field(default_factory=dict)


def is_candidate(model: ClassicModelSpec, steps: set[str]) -> bool:
    return (model.device is None and (model.type == "tabular" or model.framework == "python")
            and model.profile.cpu is not None and model.framework in CPU_FRAMEWORKS and model.name not in steps
            and not model.overrides.dedicated_gpu and model.built_for is None)


class _Costs:
    """The cheapest GPU and CPU placements' USD/h of sets of models, each set priced once."""

    def __init__(self, models: dict[str, ClassicModelSpec], pipelines: list[PipelineSpec], env: EnvironmentSpec,
                 catalogue: InstanceCatalogue, in_use: dict[str, tuple[int, int]]) -> None:
        self.models, self.pipelines, self.env, self.catalogue, self.in_use = models, pipelines, env, catalogue, in_use
        self._seen: dict[tuple[str, frozenset[str]], float] = {}

    def _pipes(self, names: frozenset[str]) -> list[PipelineSpec]:
        return [p for p in self.pipelines if set(p.step_models()) <= names]

    def gpu(self, names: frozenset[str]) -> float:
        if ("gpu", names) not in self._seen:
            fits, _ = gpu_placements([self.models[n] for n in sorted(names)], tuple(self._pipes(names)), self.env,
                                     self.catalogue, self.in_use, exact=1) if names else ([], [])
            self._seen[("gpu", names)] = 0.0 if not names else fits[0].usd_per_hour if fits else math.inf
        return self._seen[("gpu", names)]

    def cpu(self, names: frozenset[str]) -> float:
        if ("cpu", names) not in self._seen:
            fits, _ = cpu_placements([self.models[n] for n in sorted(names)], self._pipes(names), self.env,
                                     self.catalogue) if names else ([], [])
            self._seen[("cpu", names)] = 0.0 if not names else fits[0].usd_per_hour if fits else math.inf
        return self._seen[("cpu", names)]


def _added(total_with: float, total_without: float) -> float | None:
    return None if math.isinf(total_with) else total_with - total_without


def _usd(value: float | None) -> str:
    return "no placement within its SLA" if value is None else f"{value:.2f} USD/h"


def _total(cpu: frozenset[str], everything: frozenset[str], costs: _Costs) -> float:
    return costs.gpu(everything - cpu) + costs.cpu(cpu)


def _split(candidates: list[str], explicit: frozenset[str], everything: frozenset[str], costs: _Costs) -> frozenset[str]:
    """The CPU side: the cheapest split of ``candidates`` (see the module docstring)."""
    if len(candidates) <= EXACT_CANDIDATES:
        subsets = (frozenset(c for i, c in enumerate(candidates) if mask >> i & 1) for mask in range(2 ** len(candidates)))
        return explicit | min(subsets, key=lambda chosen: (_total(explicit | chosen, everything, costs), len(chosen),
                                                           sorted(chosen)))
    cpu = explicit
    for name in candidates:
        if _total(cpu | {name}, everything, costs) < _total(cpu, everything, costs) - 1e-9:
            cpu = cpu | {name}
    return cpu


def _why(name: str, model: ClassicModelSpec, cpu: frozenset[str], everything: frozenset[str], costs: _Costs) -> Decision:
    """What the model adds on either side, the other models staying where they are."""
    gpu_side, rest = everything - cpu, cpu - {name}
    on_gpu = _added(costs.gpu(gpu_side | {name}), costs.gpu(gpu_side - {name}))
    on_cpu = _added(costs.cpu(rest | {name}), costs.cpu(rest))
    what = f"a {model.type} {model.framework} model with a measured CPU profile (profile.cpu)"
    figures = (f"on the CPU nodes it adds {_usd(on_cpu)} to the stack, on the GPUs {_usd(on_gpu)} (ranking prices: "
               "node-hours at the stack's capacity type with their root volumes)")
    if name in cpu:
        return Decision(choice="KIND_CPU on a CPU node", reason=f"{what}: {figures}, so the compiler places it on a "
                        "CPU, where its SLA holds at its CPU compute time",
                        rejected=(Alternative(option="GPU", reason=f"adds {_usd(on_gpu)}", usd_per_hour=on_gpu),))
    return Decision(choice="GPU", reason=f"{what}, but {figures}: it stays on the GPU",
                    rejected=(Alternative(option="KIND_CPU on a CPU node", reason=f"adds {_usd(on_cpu)}",
                                          usd_per_hour=on_cpu),))


def choose_devices(classic: list[Indexed], pipelines: list[PipelineSpec], env: EnvironmentSpec,
                   catalogue: InstanceCatalogue, in_use: dict[str, tuple[int, int]], issues: list[Issue]) -> Devices:
    """The CPU models of the stack (see the module docstring); ``device: cpu`` without an allowed CPU family
    is an issue located at the model's ``device``."""
    models = {m.name: m for _, m in classic}
    explicit = {m.name for m in models.values() if m.device == "cpu"}
    allowed = catalogue.cpu_in_families(env.instance_families)
    if explicit and not allowed:
        families = ", ".join(catalogue.cpu_families())
        issues += [Issue("", 0, 0, f"models[{i}].device", f"{m.name}: device: cpu, but stack {env.name} allows no "
                         f"CPU instance family (modelfleet:instanceFamilies: {', '.join(env.instance_families)})",
                         f"add a CPU family ({families}) to modelfleet:instanceFamilies, or drop device: cpu")
                   for i, m in classic if m.name in explicit]
        return Devices(frozenset())
    steps = {s for p in pipelines for s in p.step_models()}
    costs, everything = _Costs(models, pipelines, env, catalogue, in_use), frozenset(models)
    candidates = sorted(n for n, m in models.items() if is_candidate(m, steps))
    # Without candidates the split is what models.yaml says: pricing it would pack the whole fleet for nothing.
    cpu = frozenset() if not allowed else _split(candidates, frozenset(explicit), everything, costs) if candidates \
        else frozenset(explicit)
    decisions = {name: _why(name, models[name], cpu, everything, costs) if allowed else Decision(
        choice="GPU", reason=f"a {models[name].type} model with a measured CPU profile, but stack {env.name} "
                             "allows no CPU instance family (modelfleet:instanceFamilies)") for name in candidates}
    gpu_side = everything - cpu
    alternative = {n: _added(costs.gpu(gpu_side | {n}), costs.gpu(gpu_side)) for n in sorted(cpu)}
    for name in sorted(explicit):
        decisions[name] = Decision(choice="KIND_CPU on a CPU node", reason=f"device: cpu, as models.yaml says; on "
                                   f"the GPUs it would add {_usd(alternative[name])} (ranking prices)")
    return Devices(frozenset(cpu), decisions, alternative)
