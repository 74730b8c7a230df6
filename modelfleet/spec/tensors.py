"""The shared base of every ``*Spec``, and a Triton model's tensors (used by models and by pipelines)."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .values import MAX_DIM, FieldProblem


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True, strict=True,
                              allow_inf_nan=False)


# A list field: YAML's lists are taken (strict mode alone takes only tuples) while each item stays strict.
# Field-level, so validation stays in pydantic's core: a model-level converter cost 15% of `validate`.
LIST = {"strict": False}


TensorDtype = Literal[
    "bool", "uint8", "uint16", "uint32", "uint64", "int8", "int16", "int32", "int64",
    "fp16", "bf16", "fp32", "fp64", "string",
]  # fmt: skip


class TensorSpec(Frozen):
    """One input or output tensor of a Triton model. ``dims`` exclude the batch dimension; -1 = variable."""

    name: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.:\-]*$", max_length=128)]
    dtype: TensorDtype
    dims: Annotated[tuple[Annotated[int, Field(strict=True, ge=-1, le=MAX_DIM)], ...], Field(
        **LIST, min_length=1, max_length=8,
        description=f"sizes without the batch dimension: positive, or -1 for variable; each at most {MAX_DIM:,} "
                    "(int32, what TensorRT and most backends address); at most 8 dimensions")]

    # The size of each variable dimension in a representative request (the warmup's, plan/triton/warmup.py); the
    # fixed ones repeat dims. None: 16 for each -1 (spec/warmup.TYPICAL_DIM).
    typical_dims: Annotated[Optional[tuple[Annotated[int, Field(strict=True, ge=1, le=MAX_DIM)], ...]], Field(
        **LIST, min_length=1, max_length=8,
        description="dims of a representative request (the warmup's): dims with each -1 at a typical size; "
                    "default 16 for each -1")] = None

    @model_validator(mode="after")
    def _typical(self) -> TensorSpec:
        if self.typical_dims is None:
            return self
        if len(self.typical_dims) != len(self.dims) or any(
                d not in (-1, t) for d, t in zip(self.dims, self.typical_dims)):
            raise FieldProblem(("typical_dims",), f"typical_dims {list(self.typical_dims)} must repeat dims "
                               f"{list(self.dims)} with each -1 at a typical size",
                               "write the same number of dims, changing only the -1s")
        return self

    @field_validator("dims")
    @classmethod
    def _dims_positive(cls, dims: tuple[int, ...]) -> tuple[int, ...]:
        if 0 in dims:
            raise FieldProblem((), f"dims must be positive or -1 (variable), got {list(dims)}",
                               "write each dimension's size, or -1 where it varies")
        return dims
