"""Whether every model pins what it serves (spec/versions.py), and where a pinned LLM's weights are read.

Unpinned is an error in a stack with ``modelfleet:requirePins: true`` (production: what runs there must be
what was reviewed), and a warning elsewhere (a first try should not need pins).
"""

from __future__ import annotations

from ..errors import Issue
from ..spec.environment import EnvironmentSpec
from ..spec.models import ClassicModelSpec, LlmModelSpec
from .types import Warning_


def from_hub_id(artifact: str) -> bool:
    return not artifact.startswith("s3://")


def pinned_artifact(model: LlmModelSpec) -> str:
    """An s3:// checkpoint's pinned sub-prefix, or the Hub id (its commit goes to --revision)."""
    if model.revision is None or from_hub_id(model.artifact):
        return model.artifact
    return f"{model.artifact.rstrip('/')}/{model.revision}"


def _unpinned(model: ClassicModelSpec | LlmModelSpec) -> tuple[str, str, str] | None:
    """(field, what follows, fix) for an unpinned model; None when it is pinned."""
    if isinstance(model, ClassicModelSpec):
        if model.version is not None or model.versions is not None:
            return None
        return ("version", "Triton loads whatever version folders its prefix holds when a pod starts, so replicas "
                "can disagree", "pin the version folder: version: 1 (optionally {number: 1, sha256: ...})")
    if model.revision is not None:
        return None
    what = ("vLLM loads the Hub's main branch, whatever it is that day" if from_hub_id(model.artifact) else
            "the checkpoint under the s3:// prefix can change under running pods")
    return "revision", what, ("pin the Hub commit: revision: <40-hex sha>" if from_hub_id(model.artifact) else
                              "pin an immutable sub-prefix: revision: <name> (read from <artifact>/<name>/)")


def _unpinned_adapters(model: ClassicModelSpec | LlmModelSpec) -> list[tuple[str, str, str]]:
    """(field, what follows, fix) for each LoRA adapter without a revision."""
    if not isinstance(model, LlmModelSpec) or model.lora is None:
        return []
    return [(f"lora.adapters[{i}].revision", f"adapter {a.name} ({a.artifact}) is fetched from the Hub's main "
             "branch, whatever it is that day", "pin the adapter repository's commit: revision: <40-hex sha>")
            for i, a in enumerate(model.lora.adapters) if a.revision is None]


def pin_issues(models: list[tuple[int, ClassicModelSpec | LlmModelSpec]], env: EnvironmentSpec, issues: list[Issue],
               warnings: list[Warning_]) -> None:
    for index, model in models:
        unpinned = _unpinned(model)
        for field, what, fix in ([unpinned] if unpinned else []) + _unpinned_adapters(model):
            _report(index, model.name, field, what, fix, env, issues, warnings)


def _report(index: int, name: str, field: str, what: str, fix: str, env: EnvironmentSpec, issues: list[Issue],
            warnings: list[Warning_]) -> None:
    if env.require_pins:
        issues.append(Issue("", 0, 0, f"models[{index}].{field}", f"{name} is not pinned, and stack "
                            f"{env.name} requires pins (modelfleet:requirePins): {what}", fix))
    else:
        warnings.append(Warning_(model=name, message=f"not pinned: {what}; {fix}"))
