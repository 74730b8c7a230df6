"""What ``validate --online`` checks of each LLM read from the Hugging Face Hub, and how what the Hub says is
compared with models.yaml. Pure: the Hub's answers come in as data (engines/hub_client.py fetches them).

For a Hub artifact (not s3://), pinned or not:

- the revision: a pinned commit must exist in the repository (the Hub resolves it to itself); unpinned, the
  commit the main branch points at is reported, to pin;
- gating: the Hub's ``gated`` ("auto" or "manual" when the licence must be accepted) against hub.gated or the
  preset's knowledge (LlmModelSpec.hub_gated): a token demanded for nothing, or a gated repository treated as
  open (its pods would crash-loop without the token);
- the checkpoint: config.json's published dtype (hf_config.published_dtype) against size.dtype (fp8 for a
  16-bit checkpoint is vLLM's quantization while loading, not a difference), its quantization_config against
  quantization, and its figures (layers, heads, KV heads, hidden size) against the preset's or config's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .hf_config import published_dtype, shape_fields
from .models import FleetSpec, LlmModelSpec
from .versions import HF_COMMIT

FIGURES = ("layers", "heads", "kv_heads", "hidden")
UNQUANTIZED = ("fp32", "fp16", "bf16")


@dataclass(frozen=True)
class HubTarget:
    """One model's repository and the revision to read (a pinned commit, else "main")."""

    model: str
    repo: str
    revision: str
    pinned: bool

    def describe(self) -> str:
        at = self.revision[:12] if self.pinned else "main (unpinned)"
        return (f"{self.model}: {self.repo}@{at}: the revision resolves, gating against hub.gated, config.json's "
                "dtype, quantization and figures against models.yaml")


@dataclass(frozen=True)
class HubFacts:
    """What the Hub answered for one target: the commit the revision resolves to, its gating, its config.json."""

    sha: str
    gated: bool
    config: Mapping[str, Any] | None  # None: the repository has no config.json at that revision


def hub_targets(fleet: FleetSpec) -> list[HubTarget]:
    """Every LLM read from the Hub, by name."""
    out = []
    for model in sorted(fleet.models, key=lambda m: m.name):
        if isinstance(model, LlmModelSpec) and not model.artifact.startswith("s3://"):
            pinned = model.revision is not None and bool(HF_COMMIT.match(model.revision))
            out.append(HubTarget(model.name, model.artifact, model.revision if pinned else "main", pinned))
    return out


def hub_differences(model: LlmModelSpec, target: HubTarget, facts: HubFacts) -> list[str]:
    """Each way the Hub's answer differs from models.yaml, as one sentence with its fix; empty when it agrees."""
    found = []
    if target.pinned and facts.sha != target.revision:
        found.append(f"revision {target.revision} resolves to {facts.sha}: pin the full commit id")
    if not target.pinned:
        found.append(f"unpinned: main is at {facts.sha} (pin it: revision: {facts.sha})")
    token, why = model.hub_gated()
    if facts.gated and not token:
        found.append(f"the repository is gated, but {why}: its pods would be refused without the stack's hfToken "
                     "(set hub: {gated: true})")
    if not facts.gated and token:
        found.append("the repository is not gated: hub: {gated: false} lets the stack deploy it without an hfToken")
    if facts.config is None:
        return found + ["no config.json at this revision: vLLM cannot load it"]
    return found + _checkpoint_differences(model, facts.config)


def _checkpoint_differences(model: LlmModelSpec, config: Mapping[str, Any]) -> list[str]:
    found = []
    dtype, declared = published_dtype(dict(config)), model.size.dtype
    quantized = isinstance(config.get("quantization_config"), Mapping)
    if dtype and declared and dtype != declared and not (declared == "fp8" and dtype in UNQUANTIZED) and not (
            quantized and model.quantization):
        found.append(f"config.json publishes {dtype} weights; size.dtype says {declared} (set size.dtype: {dtype})")
    method = config["quantization_config"].get("quant_method") if quantized else None
    if method != model.quantization and (method or model.quantization):
        found.append(f"config.json's quantization_config says {method or 'none'}; quantization says "
                     f"{model.quantization or 'none'}")
    try:
        published = shape_fields(config)
    except ValueError as exc:
        return found + [f"config.json: {exc}"]
    declared_figures = model.resolved_architecture().fields
    for name in FIGURES:
        if published.get(name) != declared_figures.get(name):
            found.append(f"config.json's {name} is {published.get(name)}, models.yaml's architecture says "
                         f"{declared_figures.get(name)}")
    return found
