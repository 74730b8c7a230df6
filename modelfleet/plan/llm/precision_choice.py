"""``precision: auto`` or a list: the cheapest weight precision that meets the SLA, by the planner's own search.

Each precision the model allows (LlmModelSpec.precisions: the checkpoint's own, and fp8 for a 16-bit
checkpoint vLLM quantizes while loading) is planned as if models.yaml said that ``size.dtype`` alone, and the
cheapest candidate wins at the planner's ranking price; a tie keeps the checkpoint's own precision (no
quality given up for nothing). Without ``precision`` the model is planned at its ``size.dtype``, unchanged.
"""

from __future__ import annotations

import json

from ...errors import Issue
from ...spec.environment import EnvironmentSpec
from ...spec.load import with_fields
from ...spec.models import LlmModelSpec
from ..hardware.instances import InstanceCatalogue
from ..types import Alternative, Decision
from .candidate import LlmCandidate, Outcome
from .precision import weights_changes
from .search import choose_llm_layout

Chosen = tuple[LlmCandidate, Decision, dict[str, list[Outcome]]]
Precise = tuple[LlmModelSpec, Chosen, Decision | None]  # choose_precision's answer
SEARCH_IRRELEVANT = frozenset({"name", "artifact", "revision"})  # which checkpoint, by name: not its shape


def search_key(model: LlmModelSpec) -> str:
    """What choose_precision reads of ``model``: every field but which checkpoint it names (its name, artifact
    and revision; the simulations are seeded from the traffic, not the name). Models of one key, in one
    environment, get the same layouts, decisions and simulations (tests/plan/test_prewarm.py)."""
    return json.dumps(model.model_dump(mode="json", exclude=SEARCH_IRRELEVANT), sort_keys=True)


def as_searched(model: LlmModelSpec, searched: Precise) -> Precise:
    """choose_precision's answer for ``model``, from its answer for another model of the same ``search_key``:
    the layout and the decisions as they were; the model as planned is ``model`` at the precision chosen."""
    variant, chosen, picked = searched
    if model.precision is None:
        return model, chosen, picked
    planned = with_fields(model, weights_changes(model, variant.size.dtype))
    assert isinstance(planned, LlmModelSpec)
    return planned, chosen, picked


def choose_precision(model: LlmModelSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue,
                     index: int) -> Precise | Issue:
    """The model as planned (its size.dtype the chosen precision), the planner's choice, and why this
    precision (None when the model allows one only). An Issue when no precision meets the SLA: the
    checkpoint's own precision's."""
    if model.precision is None:
        chosen = choose_llm_layout(model, env, catalogue, index)
        return chosen if isinstance(chosen, Issue) else (model, chosen, None)
    tried: list[tuple[str, LlmModelSpec, Chosen | Issue]] = []
    for dtype in model.precisions():
        variant = with_fields(model, weights_changes(model, dtype))
        assert isinstance(variant, LlmModelSpec)
        tried.append((dtype, variant, choose_llm_layout(variant, env, catalogue, index)))
    fits = [(d, v, c) for d, v, c in tried if not isinstance(c, Issue)]
    if not fits:
        return tried[0][2]  # type: ignore[return-value]  (an Issue: every one failed)
    dtype, variant, chosen = min(fits, key=lambda t: t[2][0].usd_per_hour)  # min keeps the first of equals
    return variant, chosen, _decision(model, dtype, chosen[0], tried)


def _decision(model: LlmModelSpec, dtype: str, best: LlmCandidate,
              tried: list[tuple[str, LlmModelSpec, Chosen | Issue]]) -> Decision:
    rejected = tuple(
        Alternative(option=f"{d} weights", usd_per_hour=None if isinstance(c, Issue) else round(c[0].usd_per_hour, 4),
                    reason=("no plan meets the SLA" if isinstance(c, Issue) else
                            f"{c[0].usd_per_hour:,.2f} USD/h ({c[0].label} x{c[0].replicas}) against "
                            f"{best.usd_per_hour:,.2f}"))
        for d, _, c in tried if d != dtype)
    asked = "auto" if model.precision == "auto" else "[" + ", ".join(model.precision or ()) + "]"
    return Decision(choice=f"precision {dtype} (precision: {asked})",
                    reason=f"the cheapest of {', '.join(d for d, _, _ in tried)} that meets the SLA "
                           f"({best.usd_per_hour:,.2f} USD/h, {best.label} x{best.replicas}); a tie keeps the "
                           "checkpoint's own; quality at a lower precision is the model owner's call",
                    rejected=rejected)
