"""A spec's tensors as the plan records them: Triton's data type names (``TYPE_FP32``), dims as written."""

from __future__ import annotations

from ...spec.tensors import TensorSpec
from ..types import TensorPlan

TRITON_DTYPES = {
    "bool": "TYPE_BOOL", "uint8": "TYPE_UINT8", "uint16": "TYPE_UINT16", "uint32": "TYPE_UINT32",
    "uint64": "TYPE_UINT64", "int8": "TYPE_INT8", "int16": "TYPE_INT16", "int32": "TYPE_INT32",
    "int64": "TYPE_INT64", "fp16": "TYPE_FP16", "bf16": "TYPE_BF16", "fp32": "TYPE_FP32", "fp64": "TYPE_FP64",
    "string": "TYPE_STRING",
}


def tensors(specs: tuple[TensorSpec, ...]) -> tuple[TensorPlan, ...]:
    return tuple(TensorPlan(name=t.name, data_type=TRITON_DTYPES[t.dtype], dims=t.dims) for t in specs)
