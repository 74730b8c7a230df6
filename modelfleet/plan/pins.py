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


def pin_issues(models: list[tuple[int, ClassicModelSpec | LlmModelSpec]], env: EnvironmentSpec, issues: list[Issue],
               warnings: list[Warning_]) -> None:
    for index, model in models:
        unpinned = _unpinned(model)
        if unpinned is None:
            continue
        field, what, fix = unpinned
        if env.require_pins:
            issues.append(Issue("", 0, 0, f"models[{index}].{field}", f"{model.name} is not pinned, and stack "
                                f"{env.name} requires pins (modelfleet:requirePins): {what}", fix))
        else:
            warnings.append(Warning_(model=model.name, message=f"not pinned: {what}; {fix}"))
