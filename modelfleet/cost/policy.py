"""Guardrails on a compiled, costed environment: the platform team's policies and the monthly budget.

Pure. ``check_policies`` and ``check_budget`` report; ``enforce_guardrails`` is the compile step run
after ``compile_fleet`` (``compile_with_guardrails`` does both, for the project layer and the Pulumi
program alike): every policy violation (and a budget overrun in ``fail`` mode) becomes a CompileError
issue naming the model, the rule and the fix; ``warn`` mode adds a plan warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CompileError, Issue
from ..plan.compiler import compile_fleet, models_in
from ..plan.hardware.instances import InstanceCatalogue
from ..plan.llm.precision import LAYERWISE_ONLINE_QUANTIZATION_SINCE, vllm_version, weight_dtype
from ..plan.types import FleetPlan, PlanModel, TritonModelPlan, VllmModelPlan, Warning_
from ..spec.environment import EnvironmentSpec, ForbidRule
from ..spec.load import locate_issues
from ..spec.lock import StackLock
from ..spec.models import ClassicModelSpec, FleetSpec, LlmModelSpec
from ..spec.yaml_source import Document
from .dtype_check import with_dtype_warnings
from .fleet import FleetCost, compute_fleet_cost, estimate_llm_loads

BUDGET_WARNING = "budget"  # the Warning_.model of a budget warning: it concerns the environment, not a model


class BudgetStatus(PlanModel):
    environment: str
    budget_usd: float
    basis: str  # "desired" | "max"
    on_exceed: str  # "fail" | "warn"
    monthly_usd: float | None  # None: some price is unknown, so the budget cannot be checked
    largest: tuple[tuple[str, float], ...]  # the three dearest models at the basis, for the message

    @property
    def unknown(self) -> bool:
        return self.monthly_usd is None

    @property
    def over(self) -> bool:
        """The cost is known and above the budget (an unknown cost is :attr:`unknown`, not over)."""
        return self.monthly_usd is not None and self.monthly_usd > self.budget_usd

    @property
    def passes(self) -> bool:
        return not (self.over or self.unknown)

    @property
    def blocks(self) -> bool:
        """The compile (``render``, ``pulumi up``) fails: over or unknown, in ``fail`` mode (fails closed)."""
        return not self.passes and self.on_exceed == "fail"

    @property
    def verdict(self) -> str:
        """"ok", "OVER BUDGET" or "cannot check (prices unknown)", then what that does to the deploy."""
        if self.passes:
            return "ok"
        what = "cannot check (prices unknown)" if self.unknown else "OVER BUDGET"
        return f"{what}: {'the compile fails' if self.blocks else 'a warning only'} (onExceed: {self.on_exceed})"

    def describe(self) -> str:
        if self.monthly_usd is None:
            return (f"{self.environment}: the {self.basis} monthly cost is unknown (unpriced instance types), so the "
                    f"budget of {self.budget_usd:,.2f} USD cannot be checked")
        verdict = "exceeds" if self.over else "is within"
        return (f"{self.environment}: {self.basis} monthly cost {self.monthly_usd:,.2f} USD {verdict} the budget of "
                f"{self.budget_usd:,.2f} USD ({self.monthly_usd / self.budget_usd:.0%})")


def check_budget(cost: FleetCost, env: EnvironmentSpec) -> BudgetStatus | None:
    """The environment's cost against its budget (None when the stack sets no budget)."""
    if env.budget is None:
        return None
    basis = env.budget.basis
    priced = [(m.name, m.monthly_usd.at(basis)) for m in cost.models if m.monthly_usd is not None]
    largest = tuple(sorted(priced, key=lambda p: (-p[1], p[0]))[:3])
    return BudgetStatus(environment=cost.environment, budget_usd=env.budget.monthly_usd, basis=basis,
                        on_exceed=env.budget.on_exceed, largest=largest,
                        monthly_usd=None if cost.monthly_usd is None else cost.monthly_usd.at(basis))


def budget_issue(status: BudgetStatus, stack_file: str = "") -> Issue:
    dearest = ", ".join(f"{name} {usd:,.2f}" for name, usd in status.largest)
    if status.monthly_usd is None:
        return Issue(stack_file, 0, 0, "config.modelfleet:budget", status.describe(),
                     "run `modelfleet prices refresh --region R` and pass --prices, or remove the budget")
    excess = status.monthly_usd - status.budget_usd
    return Issue(stack_file, 0, 0, "config.modelfleet:budget",
                 f"{status.describe()}: over by {excess:,.2f} USD; dearest models: {dearest}",
                 "raise modelfleet:budget.monthlyUsd, lower the dearest models' load or replicas, "
                 "or set modelfleet:budget.onExceed: warn")


def check_policies(plan: FleetPlan, cost: FleetCost, fleet: FleetSpec, env: EnvironmentSpec) -> list[Issue]:
    """Every policy violation of every model, each with the model, the rule and the fix."""
    specs = {m.name: (i, m) for i, m in models_in(fleet, env.name)}
    issues: list[Issue] = []
    for model in plan.models:
        index, spec = specs[model.name]
        where = f"models[{index}]"
        pinned = isinstance(spec, LlmModelSpec) and spec.overrides.instance_type is not None
        issues += _family_rules(model, env, where, pinned)
        issues += _size_rules(model, spec, plan, cost, env, where)
    return issues


def _family_rules(model: TritonModelPlan | VllmModelPlan, env: EnvironmentSpec, where: str,
                  pinned: bool) -> list[Issue]:
    family = model.instance_type.split(".")[0]
    policy = env.policies
    move = ("pin overrides.instance_type to an allowed type" if pinned
            else f"drop {family} from modelfleet:instanceFamilies so the compiler picks an allowed family")
    disable = f"or disable the model here (environments: {{{env.name}: {{enabled: false}}}})"
    issues = []
    if policy.allowed_families is not None and family not in policy.allowed_families:
        issues.append(Issue("", 0, 0, where, f"{model.name}: runs on {model.instance_type}; policy allowedFamilies "
                            f"of {env.name} is {', '.join(policy.allowed_families)}", f"{move}, {disable}"))
    for rule in policy.forbid:
        if _forbids(rule, family, env.capacity_type):
            kind = f"{rule.capacity_type} " if rule.capacity_type else ""
            why = f" ({rule.reason})" if rule.reason else ""
            spot = " use spot capacity (modelfleet:capacityType: spot)," if rule.capacity_type == "on-demand" else ""
            issues.append(Issue("", 0, 0, where, f"{model.name}: runs on {env.capacity_type} {model.instance_type}; "
                                f"policy forbid: no {kind}{'/'.join(rule.families)} in {env.name}{why}",
                                f"{spot} {move}, {disable}".strip()))
    return issues


def _forbids(rule: ForbidRule, family: str, capacity_type: str) -> bool:
    return family in rule.families and rule.capacity_type in (None, capacity_type)


def _size_rules(model: TritonModelPlan | VllmModelPlan, spec: ClassicModelSpec | LlmModelSpec, plan: FleetPlan,
                cost: FleetCost, env: EnvironmentSpec, where: str) -> list[Issue]:
    policy, issues = env.policies, []
    costed = cost.model(model.name)
    fewer = "".join(f"{fix}, " for fix in fewer_gpus_fixes(model, spec, env))
    gpus = costed.gpus[2]
    if policy.max_gpus_per_model is not None and gpus > policy.max_gpus_per_model:
        per = gpus // max(1, _max_replicas(model, plan))
        issues.append(Issue("", 0, 0, where, f"{model.name}: holds {gpus} GPUs at max replicas "
                            f"({_max_replicas(model, plan)} x {per} {plan.node_group(model.node_group).gpu_model}); "
                            f"policy maxGpusPerModel of {env.name} is {policy.max_gpus_per_model}",
                            f"lower the peak load or overrides.replicas, {fewer}lower "
                            "modelfleet:replicas.maxScaleFactor, or raise the policy"))
    cap = policy.max_monthly_usd_per_model
    if cap is not None and costed.monthly_usd is None:
        issues.append(Issue("", 0, 0, where, f"{model.name}: cost unknown in {env.region}, so policy "
                            f"maxMonthlyUsdPerModel ({cap:,.2f}) cannot be checked",
                            "run `modelfleet prices refresh` for this region and pass --prices"))
    elif cap is not None and costed.monthly_usd is not None and costed.monthly_usd.desired > cap:
        issues.append(Issue("", 0, 0, where, f"{model.name}: costs {costed.monthly_usd.desired:,.2f} USD/month at "
                            f"desired replicas; policy maxMonthlyUsdPerModel of {env.name} is {cap:,.2f}",
                            f"lower the peak load or the replicas, {fewer}or raise the policy"))
    return issues


def fewer_gpus_fixes(model: TritonModelPlan | VllmModelPlan, spec: ClassicModelSpec | LlmModelSpec,
                     env: EnvironmentSpec) -> list[str]:
    """What else could lower the GPUs a model holds as the compiler sizes it, and only that. A Triton model's
    replicas follow its measured throughput (quantising the artifact is the model owner's job, not a field
    here); an LLM's follow its weights and KV cache, which only a checkpoint that loads smaller shrinks."""
    if isinstance(spec, ClassicModelSpec):
        return [] if model.measured or spec.overrides.replicas else [
            "measure it on its GPU (`modelfleet profile --url URL`, or perf_analyzer into profile.*): unmeasured, "
            "the compiler assumed half-full batches within an execution budget"]
    return _quantise_fixes(model, spec, env) if isinstance(model, VllmModelPlan) else []


def _quantise_fixes(model: VllmModelPlan, spec: LlmModelSpec, env: EnvironmentSpec) -> list[str]:
    """A smaller checkpoint helps only where weights decide the GPUs: more than one GPU per replica, or replicas
    the KV cache or the TPOT set (not the availability floor, a pin, TTFT or the max_num_seqs cap): more KV
    cache, or fewer weight bytes read per decode step, would cut them."""
    per_replica = model.gpus_per_replica > 1
    by_load = model.binding_constraint in ("memory", "tpot") and model.replicas > model.min_replicas
    dtype = weight_dtype(spec)
    if not (per_replica or by_load) or dtype == "int4":
        return []
    what = "fewer GPUs per replica" if per_replica else (
        "more KV cache per replica, so fewer replicas" if model.binding_constraint == "memory" else
        "faster decoding, so more sequences per replica")
    if dtype in ("fp8", "int8") and spec.quantization is not None:
        return [f"serve a 4-bit checkpoint (size.dtype: int4 with quantization: awq_marlin or gptq_marlin) for {what}"]
    prequantized = ("serve a pre-quantized checkpoint (size.dtype: int4 with quantization: awq_marlin or gptq_marlin, "
                    f"or size.dtype: fp8 with quantization: fp8 on L4, L40S, H100 or H200) for {what}")
    image = spec.image or env.vllm.image  # the model's own, else the stack's
    if (vllm_version(image) or (0, 0)) >= LAYERWISE_ONLINE_QUANTIZATION_SINCE:
        return [prequantized + ("" if dtype == "fp8" else ", or size.dtype: fp8 alone (this vLLM release "
                                                          "quantizes the 16-bit checkpoint layer by layer)")]
    online = ("its size.dtype: fp8 without quantization" if dtype == "fp8" else "size.dtype: fp8 alone would not: it")
    return [f"{prequantized}; {online} still loads the 16-bit weights onto the GPUs before quantizing them "
            f"({image})"]


def _max_replicas(model: TritonModelPlan | VllmModelPlan, plan: FleetPlan) -> int:
    if isinstance(model, TritonModelPlan):
        return plan.server(model.server).max_replicas
    return model.max_replicas


def enforce_guardrails(plan: FleetPlan, cost: FleetCost, fleet: FleetSpec, env: EnvironmentSpec,
                       stack_file: str = "") -> FleetPlan:
    """The plan, with a budget warning in ``warn`` mode; CompileError on any violation otherwise."""
    issues = check_policies(plan, cost, fleet, env)
    status = check_budget(cost, env)
    if status is not None and status.blocks:
        issues.append(budget_issue(status, stack_file))
    if issues:
        raise CompileError(issues)
    if status is None or status.passes:
        return plan
    warning = Warning_(model=BUDGET_WARNING, message=budget_issue(status).message)
    return plan.model_copy(update={"warnings": tuple(sorted(plan.warnings + (warning,),
                                                            key=lambda w: (w.model, w.message)))})


def compile_with_guardrails(fleet: FleetSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                            lock: StackLock | None = None) -> tuple[FleetPlan, FleetCost]:
    """compile_fleet, priced, with the environment's policies and budget enforced: what ``plan``, ``render``
    and the Pulumi program all run, so ``pulumi up`` can never deploy a plan that ``plan`` refuses. With a
    ``lock`` whose placement breaks the fit check, a policy or the budget, the fleet is solved afresh (and the
    plan says why); the fresh plan's own problems are then the ones raised."""
    if lock is not None:
        try:
            return _guarded(fleet, env, catalogue, lock)
        except CompileError as locked:
            plan, cost = _guarded(fleet, env, catalogue, None)
            return with_warning(plan, _unlocked(locked)), cost
    return _guarded(fleet, env, catalogue, None)


def _guarded(fleet: FleetSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
             lock: StackLock | None) -> tuple[FleetPlan, FleetCost]:
    plan = with_dtype_warnings(compile_fleet(fleet, env, catalogue, lock), fleet, env, catalogue)
    cost = compute_fleet_cost(plan, catalogue, env, estimate_llm_loads(fleet, env.name))
    return enforce_guardrails(plan, cost, fleet, env), cost


def _unlocked(error: CompileError) -> Warning_:
    return Warning_(model="placement lock", message="the locked placement fails, so every model was placed afresh: "
                    + error.issues[0].message + (f" (and {len(error.issues) - 1} more)" if len(error.issues) > 1 else ""))


def with_warning(plan: FleetPlan, warning: Warning_) -> FleetPlan:
    return plan.model_copy(update={"warnings": tuple(sorted(plan.warnings + (warning,),
                                                            key=lambda w: (w.model, w.message)))})


def compile_locked(fleet: FleetSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                   lock: StackLock | None) -> FleetPlan:
    """compile_fleet with the lock, or afresh (with the reason) when the locked placement fails to compile."""
    if lock is not None:
        try:
            return compile_fleet(fleet, env, catalogue, lock)
        except CompileError as locked:
            return with_warning(compile_fleet(fleet, env, catalogue), _unlocked(locked))
    return compile_fleet(fleet, env, catalogue)


@dataclass(kw_only=True, frozen=True)
class CostedPlan:
    """One environment compiled and priced, with its guardrails evaluated but not enforced (for previews)."""

    plan: FleetPlan
    cost: FleetCost
    budget: BudgetStatus | None  # None: the stack sets no budget
    violations: tuple[Issue, ...]  # policy violations, located at their models.yaml lines
    fleet: FleetSpec  # what was compiled (a diff names the spec fields that changed)
    # The environment and prices it was compiled with: a diff plans a changed model's cheaper alternatives
    # with them (None: not kept, so none are named).
    env: EnvironmentSpec | None = None
    catalogue: InstanceCatalogue | None = None


def cost_environment(fleet: FleetSpec, doc: Document, env: EnvironmentSpec,
                     catalogue: InstanceCatalogue, lock: StackLock | None = None) -> CostedPlan:
    """Compile and price one environment without enforcing guardrails; compile errors located in ``doc``."""
    try:
        plan = with_dtype_warnings(compile_locked(fleet, env, catalogue, lock), fleet, env, catalogue)
    except CompileError as exc:
        raise locate_issues(exc, doc) from None
    cost = compute_fleet_cost(plan, catalogue, env, estimate_llm_loads(fleet, env.name))
    violations = locate_issues(CompileError(check_policies(plan, cost, fleet, env)), doc).issues
    return CostedPlan(plan=plan, cost=cost, budget=check_budget(cost, env), violations=violations, fleet=fleet,
                      env=env, catalogue=catalogue)
