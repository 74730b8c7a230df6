"""One model planned on its own and priced as ``cost`` prices it: the unit explore, the alternatives and the
dtype check compare (the model's entry changed one way or another, everything else as the stack says)."""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import CompileError
from ..plan.compiler import compile_fleet
from ..plan.hardware.instances import InstanceCatalogue
from ..plan.types import FleetPlan, TritonModelPlan, VllmModelPlan
from ..spec.environment import EnvironmentSpec
from ..spec.models import ClassicModelSpec, FleetSpec, LlmModelSpec
from .fleet import FleetCost, compute_fleet_cost, estimate_llm_loads


@dataclass(frozen=True)
class Alone:
    planned: TritonModelPlan | VllmModelPlan
    monthly_usd: float  # desired replicas, rounded to the cent as the reports show it
    fleet: FleetSpec
    plan: FleetPlan
    cost: FleetCost


def price_alone(model: ClassicModelSpec | LlmModelSpec, env: EnvironmentSpec,
                catalogue: InstanceCatalogue) -> Alone | None:
    """None when the model does not compile alone or a price is unknown."""
    fleet = FleetSpec(models=(model,))
    try:
        plan = compile_fleet(fleet, env, catalogue)
    except CompileError:
        return None
    cost = compute_fleet_cost(plan, catalogue, env, estimate_llm_loads(fleet, env.name))
    monthly = cost.model(model.name).monthly_usd
    if monthly is None:
        return None
    return Alone(plan.model(model.name), round(monthly.desired, 2), fleet, plan, cost)
