"""``size.dtype`` against the dtype the checkpoint publishes (the preset's or config.json's), with what the
difference costs.

Pure. A plan warning, not an error: the published figure is the model card's, and a team may serve a converted
checkpoint. Declaring fp8 for a 16-bit checkpoint is not a contradiction (vLLM quantizes it while loading), nor
is a declared pre-quantized checkpoint (``quantization``: its own format says what the weights are). The cost
of the difference is the model planned alone at both dtypes (cost/alone.py), when the published one is a
16- or 32-bit dtype the plan can be made at.
"""

from __future__ import annotations

from ..plan.compiler import models_in
from ..plan.hardware.instances import InstanceCatalogue
from ..plan.llm.precision import weights_changes
from ..plan.types import FleetPlan, Warning_
from ..spec.architecture import ArchitectureConfigSpec
from ..spec.environment import EnvironmentSpec
from ..spec.load import with_fields
from ..spec.models import FleetSpec, LlmModelSpec
from ..spec.presets import LLM_PRESETS
from .alone import price_alone

UNQUANTIZED = ("fp32", "fp16", "bf16")


def published(model: LlmModelSpec) -> tuple[str, str] | None:
    """(dtype, where it is published) of the model's checkpoint; None when its architecture does not say."""
    arch = model.architecture
    if isinstance(arch, str) and LLM_PRESETS[arch].dtype:
        preset = LLM_PRESETS[arch]
        return preset.dtype or "", f"preset {arch} ({preset.repo}'s config.json)"
    if isinstance(arch, ArchitectureConfigSpec) and arch.dtype:
        return arch.dtype, arch.config
    return None


def contradiction(model: LlmModelSpec) -> tuple[str, str] | None:
    """(published dtype, where) when size.dtype contradicts it; None when they agree or nothing says."""
    found = published(model)
    declared = model.size.dtype
    if found is None or declared is None or model.quantization is not None or declared == found[0]:
        return None
    if declared == "fp8" and found[0] in UNQUANTIZED:
        return None  # a 16-bit checkpoint quantized while loading, as size.dtype: fp8 asks
    return found


def dtype_warnings(fleet: FleetSpec, env: EnvironmentSpec, catalogue: InstanceCatalogue) -> list[Warning_]:
    out = []
    for _, model in models_in(fleet, env.name):
        if isinstance(model, LlmModelSpec) and (found := contradiction(model)) is not None:
            out.append(Warning_(model=model.name, message=_message(model, *found, env, catalogue)))
    return out


def _message(model: LlmModelSpec, dtype: str, where: str, env: EnvironmentSpec, catalogue: InstanceCatalogue) -> str:
    head = f"size.dtype {model.size.dtype} contradicts the {dtype} weights {where} publishes"
    fix = f"set size.dtype: {dtype}, unless the checkpoint at {model.artifact} really is {model.size.dtype}"
    if dtype not in UNQUANTIZED:
        return f"{head}; {fix} (and its quantization)"
    declared = price_alone(model, env, catalogue)
    at_published = price_alone(with_fields(model, weights_changes(model, dtype)), env, catalogue)  # type: ignore[arg-type]
    if declared is None or at_published is None:
        return f"{head}; {fix}"
    difference = declared.monthly_usd - at_published.monthly_usd
    return (f"{head}: planned alone at {model.size.dtype} it costs {declared.monthly_usd:,.2f} USD/month, at "
            f"{dtype} {at_published.monthly_usd:,.2f} ({difference:+,.2f} for the declared dtype); {fix}")


def with_dtype_warnings(plan: FleetPlan, fleet: FleetSpec, env: EnvironmentSpec,
                        catalogue: InstanceCatalogue) -> FleetPlan:
    found = dtype_warnings(fleet, env, catalogue)
    if not found:
        return plan
    return plan.model_copy(update={"warnings": tuple(sorted((*plan.warnings, *found), key=lambda w: (w.model, w.message)))})
