"""What a model serves, pinned: a Triton model's ``version`` and an LLM's ``revision``.

Why pins: without one, a new ``2/`` folder uploaded to an artifact's prefix changes no file modelfleet
renders, so nothing rolls and only the pods that happen to restart load it (replicas silently disagree), and
a Hub LLM follows ``main``, whatever it is that day. With a pin the version is in the pod template: changing
it is a reviewed change that ``plan``, ``cost --base`` and ``preview --base`` name, and it rolls that
workload alone.

- ``version: 2`` (a Triton model): the version folder ``2/`` of its artifact; Triton loads exactly it
  (``version_policy { specific { versions: 2 } }``) and the pod copies only that folder. Written as
  ``{number: 2, sha256: <64 hex>}`` it also carries the folder's content digest (``modelfleet digest DIR``
  prints it, see docs/operations/day-two.md): the pod refuses to start on any other bytes, so an overwritten folder
  cannot slip in under the same number.
- ``revision`` (an LLM): for a Hugging Face id, the 40-hex commit (vLLM ``--revision``; the download and the
  tokenizer read the same commit); for an ``s3://`` artifact, the name of an immutable sub-prefix
  (``<artifact>/<revision>/``), e.g. the checkpoint's commit or date.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Optional

from pydantic import BeforeValidator, Field, WithJsonSchema

from .tensors import Frozen
from .values import MAX_VERSION, FieldProblem

HF_COMMIT = re.compile(r"^[0-9a-f]{40}$")
S3_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._=-]{0,127}$")
SHA256 = r"^[0-9a-f]{64}$"


class VersionSpec(Frozen):
    """A Triton model's pinned version folder, optionally with the folder's content digest."""

    number: Annotated[int, Field(strict=True, gt=0, le=MAX_VERSION,
                                 description="the version folder (a positive int64), e.g. 2 for <artifact>/2/")]
    # None: the folder number alone is the pin (S3 prefixes are mutable: the digest is what makes it exact).
    sha256: Annotated[Optional[str], Field(pattern=SHA256, description=(
        "SHA-256 of the version folder's content (`modelfleet digest DIR`); the pod refuses other bytes"))] = None


def _version_shorthand(value: Any) -> Any:
    """``version: 2`` is ``{number: 2}``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return {"number": value}
    return value


TritonVersion = Annotated[VersionSpec, BeforeValidator(_version_shorthand), WithJsonSchema({"anyOf": [
    {"type": "integer", "exclusiveMinimum": 0, "maximum": MAX_VERSION, "description": "the version folder"},
    {**VersionSpec.model_json_schema(), "additionalProperties": False}]})]


def revision_problem(revision: str, artifact: str) -> FieldProblem | None:
    """Why ``revision`` cannot pin ``artifact`` (None when it can)."""
    if artifact.startswith("s3://"):
        if S3_REVISION.match(revision):
            return None
        return FieldProblem(("revision",), f"{revision!r} is not a sub-prefix name",
                            "name the immutable prefix under the artifact holding this checkpoint: letters, digits, "
                            ". _ = -, e.g. 2025-07-01 or the checkpoint's commit")
    if HF_COMMIT.match(revision):
        return None
    return FieldProblem(("revision",), f"{revision!r} is not a commit: a branch or tag of a Hub repository moves",
                        "write the full 40-hex commit id (the Hub page's 'History', or "
                        "`huggingface_hub.model_info(ID).sha`)")


class AbSplitSpec(Frozen):
    """A held split between two versions a model serves (``versions: [1, 2]``), for comparison: the generated
    client sends ``share`` of its requests that name no version to the second, the rest to the first (by a
    request key when given: the same key always gets the same version). Held: the share changes only in a
    reviewed change of models.yaml, unlike a canary rollout. Each version's requests, failures, latency and
    batch size show side by side in the server's dashboard (Triton labels its metrics with the version)."""

    versions: Annotated[tuple[Annotated[int, Field(strict=True, gt=0, le=MAX_VERSION)], ...], Field(
        strict=False, min_length=2, max_length=2, description="the two versions compared: the current one, then the "
                                                              "one on trial; both in the model's versions")]
    share: Annotated[float, Field(gt=0.0, lt=1.0, description="the share of requests the second version gets, "
                                                              "above 0 and below 1")]

    @property
    def control(self) -> int:
        return self.versions[0]

    @property
    def candidate(self) -> int:
        return self.versions[1]


def ab_split_problem(split: AbSplitSpec | None, versions: tuple[int, ...] | None) -> FieldProblem | None:
    """Why ``split`` cannot hold for a model serving ``versions`` (None when it can)."""
    if split is None:
        return None
    if split.control == split.candidate:
        return FieldProblem(("ab_split", "versions"), f"both sides are version {split.control}",
                            "compare two different versions")
    missing = [v for v in split.versions if v not in (versions or ())]
    if missing:
        return FieldProblem(("ab_split", "versions"), f"version {missing[0]} is not served (versions: "
                            f"{', '.join(map(str, versions)) if versions else 'none declared'})",
                            f"serve both: versions: [{split.control}, {split.candidate}]")
    return None
