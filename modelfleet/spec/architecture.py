"""An LLM's architecture, in one of three forms, and what it resolves to.

    architecture: llama-3.1-8b                      a preset (presets.py): a published config.json's figures
    architecture: {config: models/ds/config.json}  the model's own Hugging Face config.json, beside models.yaml
    architecture: {layers: 32, attention_heads: 32, kv_heads: 8, head_dim: 128}   the figures themselves

All three resolve to a :class:`ResolvedArchitecture`: the figures under the names ``hf_config.shape_fields``
gives them (what the planner's performance model and memory arithmetic read), the published parameter count
when one is known, and where the figures came from (which the plan says).

The loader reads the config files (``load.read_architecture_configs``) and hands their parsed JSON to
validation in the ``context``; this module never touches the disk.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Annotated, Any, Mapping

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from .hf_config import published_dtype, shape_fields
from .presets import LLM_PRESETS
from .tensors import Frozen
from .values import MAX_POSITION_EMBEDDINGS, FieldProblem, quantity

#: The validation context key under which the loader passes config files: {path as written: parsed JSON,
#: or the reason it could not be read}.
CONFIGS_CONTEXT = "architecture_configs"
CONFIG_PATH = r"^[A-Za-z0-9_.\-][A-Za-z0-9_.\-/]*\.json$"  # relative; '..' is refused by _inside
# The explicit form rarely states a vocabulary; Llama 3's 128,256 is today's typical size (its embeddings are
# 1-2% of an 8B model's weights, so the guess barely moves a speed estimate).
DEFAULT_VOCAB = 128_256


class ArchitectureSpec(Frozen):
    """The figures themselves: what sizes the KV cache and constrains tensor parallelism. The speed estimate
    also needs the widths; left out, ``hidden_size`` is heads x head_dim and the MLP width is what makes
    ``size.params`` add up. MoE, MLA and sliding-window models need ``config:`` or a preset."""

    layers: quantity(0, 1024, "num_hidden_layers in the model's config.json; at most 1,024", kind=int)
    attention_heads: quantity(0, 1024, "num_attention_heads in config.json; at most 1,024", kind=int)
    kv_heads: quantity(0, 1024, "num_key_value_heads in config.json; at most 1,024", kind=int)
    head_dim: quantity(0, 4096, "hidden_size / num_attention_heads; at most 4,096", kind=int)
    max_position_embeddings: quantity(0, MAX_POSITION_EMBEDDINGS, "the longest context the model accepts in "
                                       "tokens (config.json); at most 16,777,216", kind=int, optional=True) = None
    hidden_size: quantity(0, 65536, "hidden_size in config.json; at most 65,536 (default: attention_heads x "
                          "head_dim)", kind=int, optional=True) = None
    intermediate_size: quantity(0, 1_048_576, "intermediate_size (the MLP width) in config.json; at most "
                                "1,048,576 (default: what makes size.params add up)", kind=int, optional=True) = None
    vocab_size: quantity(0, 4_194_304, "vocab_size in config.json; at most 4,194,304 (default 128,256)", kind=int,
                         optional=True) = None

    @model_validator(mode="after")
    def _gqa(self) -> ArchitectureSpec:
        if self.attention_heads % self.kv_heads:
            raise FieldProblem((), f"attention_heads ({self.attention_heads}) must be a multiple of kv_heads "
                               f"({self.kv_heads})", "copy num_attention_heads and num_key_value_heads from the "
                               "model's config.json")
        return self


class ArchitectureConfigSpec(Frozen):
    """The model's own Hugging Face ``config.json``, committed beside models.yaml (a path relative to it)."""

    config: Annotated[str, Field(pattern=CONFIG_PATH, max_length=1024, description=(
        "path of the model's Hugging Face config.json relative to models.yaml, inside its directory (no '..', not "
        "absolute), ending in .json"))]
    _figures: dict[str, Any] | None = PrivateAttr(default=None)
    _dtype: str | None = PrivateAttr(default=None)
    _read_config: dict[str, Any] | None = PrivateAttr(default=None)  # as read, to validate a changed model again

    @field_validator("config")
    @classmethod
    def _inside(cls, value: str) -> str:
        if ".." in value.split("/"):
            raise FieldProblem((), f"{value} leaves the directory of models.yaml", "commit the config.json beside "
                               "models.yaml (e.g. models/<name>/config.json) and write its path from there")
        return value

    @model_validator(mode="after")
    def _read(self, info: ValidationInfo) -> ArchitectureConfigSpec:
        read = (info.context or {}).get(CONFIGS_CONTEXT, {}).get(self.config)
        if read is None:
            raise FieldProblem(("config",), f"{self.config} was not read", "load the catalogue with the loader "
                               "(modelfleet.load_fleet), which reads the config files it names")
        if isinstance(read, str):
            raise FieldProblem(("config",), read, f"commit the model's config.json at {self.config}, next to models.yaml")
        try:
            self._figures = shape_fields(read)
            self._dtype = published_dtype(read)
            self._read_config = read
        except ValueError as exc:
            raise FieldProblem(("config",), f"{self.config}: {exc}", "copy the model's config.json unchanged from "
                               "its Hugging Face repository") from None
        return self

    @property
    def context(self) -> dict[str, Any]:
        """The validation context that reads this config again (the loader's, for this one file)."""
        return {CONFIGS_CONTEXT: {self.config: self._read_config}} if self._read_config is not None else {}

    @property
    def dtype(self) -> str | None:
        """The weights' dtype the config.json publishes (published_dtype); None when it says none."""
        return self._dtype

    @property
    def figures(self) -> dict[str, Any]:
        if self._figures is None:
            raise ValueError(f"{self.config} was not read by the loader")
        return self._figures


@dataclass(frozen=True)
class ResolvedArchitecture:
    """What an architecture declaration comes to (see the module docstring)."""

    items: tuple[tuple[str, Any], ...]  # shape_fields' figures, sorted by name (hashable: plans cache on it)
    params: int | None  # the published total (presets); None: counted from the figures by the planner
    origin: str  # where the figures come from, as the plan says it

    @functools.cached_property
    def _mapping(self) -> dict[str, Any]:  # kept in the instance's __dict__: the planner reads it per layout
        return dict(self.items)

    @property
    def fields(self) -> dict[str, Any]:
        return dict(self._mapping)

    def _get(self, name: str) -> Any:
        return self._mapping.get(name)

    layers = property(lambda self: int(self._get("layers")))
    attention_heads = property(lambda self: int(self._get("heads")))
    kv_heads = property(lambda self: int(self._get("kv_heads")))
    head_dim = property(lambda self: int(self._get("head_dim")))
    max_position_embeddings = property(lambda self: self._get("max_position_embeddings"))
    is_moe = property(lambda self: bool(self._get("experts")))
    is_mla = property(lambda self: bool(self._get("kv_lora_rank")))


def resolve(architecture: str | ArchitectureSpec | ArchitectureConfigSpec) -> ResolvedArchitecture:
    if isinstance(architecture, str):
        return _preset(architecture)
    if isinstance(architecture, ArchitectureConfigSpec):
        return _resolved(architecture.figures, None, f"{architecture.config}")
    return _resolved(explicit_fields(architecture), None, "the figures under architecture: in models.yaml")


@functools.lru_cache(maxsize=None)
def _preset(name: str) -> ResolvedArchitecture:
    """A preset's figures, read once (validation resolves every model's architecture)."""
    preset = LLM_PRESETS[name]
    return _resolved(preset.fields, preset.params, f"preset {name} ({preset.repo} config.json)")


def _resolved(fields: Mapping[str, Any], params: int | None, origin: str) -> ResolvedArchitecture:
    return ResolvedArchitecture(tuple(sorted(fields.items())), params, origin)


def explicit_fields(spec: ArchitectureSpec) -> dict[str, Any]:
    """The explicit form under shape_fields' names; ``intermediate`` 0 means "derive it from size.params"."""
    out: dict[str, Any] = {
        "layers": spec.layers, "heads": spec.attention_heads, "kv_heads": spec.kv_heads, "head_dim": spec.head_dim,
        "hidden": spec.hidden_size or spec.attention_heads * spec.head_dim,
        "intermediate": spec.intermediate_size or 0, "vocab": spec.vocab_size or DEFAULT_VOCAB,
        "tied_embeddings": False,
    }
    if spec.max_position_embeddings is not None:
        out["max_position_embeddings"] = spec.max_position_embeddings
    return out
