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
