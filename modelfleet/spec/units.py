"""Quantities people write in models.yaml: parameter counts with units, dtypes and their sizes."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import BeforeValidator

GIB = 1024**3

#: Bytes per element for each dtype a model's weights or KV cache may use.
DTYPE_BYTES: dict[str, float] = {
    "fp32": 4.0,
    "fp16": 2.0,
    "bf16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5,
}
WeightDtype = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"]

_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
_PARAMS_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMBGT]?)\s*$", re.IGNORECASE)


def parse_param_count(value: object) -> int:
    """``"8B"`` -> 8_000_000_000, ``"350M"`` -> 350_000_000, ``"1.5T"``; plain positive integers pass.

    Raises ValueError with the accepted forms, which the loader turns into a located SpecError.
    """
    if isinstance(value, bool):
        raise ValueError("expected a parameter count such as 350M or 8B, got a boolean")
    if isinstance(value, int):
        count = value
    elif isinstance(value, float) and value.is_integer():
        count = int(value)
    elif isinstance(value, str) and (m := _PARAMS_RE.match(value)):
        count = int(round(float(m.group(1)) * _SUFFIX[m.group(2).upper()]))
    else:
        raise ValueError(f"bad parameter count {value!r}: write a number with K, M, B or T, e.g. 350M or 8B")
    if count <= 0:
        raise ValueError(f"parameter count must be positive, got {value!r}")
    return count


ParamCount = Annotated[int, BeforeValidator(parse_param_count)]


def format_param_count(count: int) -> str:
    """The inverse of :func:`parse_param_count` for display: 8030000000 -> ``"8.03B"``."""
    for suffix, scale in (("T", 10**12), ("B", 10**9), ("M", 10**6), ("K", 10**3)):
        if count >= scale:
            return f"{count / scale:.3g}{suffix}"
    return str(count)


def gib(num_bytes: float) -> float:
    return num_bytes / GIB
