"""The bound on one request's inputs: what Triton's endpoints accept in one request, checked on the spec.

What the deployed Triton accepts (checked against its sources, 2026-11):

- HTTP/REST: at most ``--http-max-input-size`` bytes per request, default 64 MiB (``HTTP_DEFAULT_MAX_INPUT_SIZE
  = 1 << 26`` in the server's src/common.h; a larger request is refused before it reaches a model). The
  compiled servers do not raise it.
- gRPC: Triton sets its server's and its Python client's message limit to ``INT32_MAX`` (2 GiB - 1,
  ``MAX_GRPC_MESSAGE_SIZE``; protobuf messages cannot be larger). A plain gRPC client receives at most 4 MiB
  by default (gRPC core's ``max_receive_message_length``), which bounds what it can read back, not send.

So the smaller, HTTP's default, is the bound: a model whose smallest request (batch 1, each variable
dimension at 1 element, each string at its 4-byte length prefix) is larger could never be called over HTTP,
and the generated client speaks both protocols. It is a SpecError at the model's ``inputs``; before it, dims
of 2^31 x 2^31 x 2^31 fp32 (2^95 bytes, about 4e28, a request) were planned.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .tensors import TensorSpec

MAX_REQUEST_INPUT_BYTES = 64 * 1024**2  # Triton's --http-max-input-size default (2^26 bytes)
GRPC_MAX_MESSAGE_BYTES = 2**31 - 1  # Triton's MAX_GRPC_MESSAGE_SIZE (INT32_MAX), server and tritonclient
STRING_PREFIX_BYTES = 4  # each BYTES element is sent as a 4-byte length, then its bytes (at least 0)
ELEMENT_BYTES = {"bool": 1, "uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "fp16": 2, "bf16": 2, "uint32": 4,
                 "int32": 4, "fp32": 4, "uint64": 8, "int64": 8, "fp64": 8, "string": STRING_PREFIX_BYTES}
REQUEST_SIZE_FIX = ("check the dims: they exclude the batch dimension and give one item's size (an image is "
                    "[3, 224, 224]); a model whose one item really is larger takes it in pieces (several requests, "
                    "or a stateful sequence) or by reference (a string input holding an s3:// key the model reads)")


def smallest_request_bytes(tensor: TensorSpec) -> int:
    """The fewest bytes one item of this tensor takes on the wire: -1 dimensions at 1 element."""
    return math.prod(max(d, 1) for d in tensor.dims) * ELEMENT_BYTES[tensor.dtype]


def format_bytes(count: int) -> str:
    """1,024-based, the unit a person reads: 64 MiB, 192 MiB, 602,112 bytes below 1 MiB, 3.96e+28 bytes
    beyond the units."""
    units = ("MiB", "GiB", "TiB", "PiB", "EiB")
    if count < 1024**2 or count >= 1024 ** (len(units) + 2):
        return f"{count:,} bytes" if count < 1024**2 else f"{count:.3g} bytes"
    exponent = int(math.log(count, 1024)) - 2
    return f"{count / 1024 ** (exponent + 2):,.4g} {units[exponent]}"


def request_size_problem(inputs: Sequence[TensorSpec]) -> str | None:
    """Why one request cannot carry these inputs, or None when the smallest one fits the bound."""
    sizes = [(t, smallest_request_bytes(t)) for t in inputs]
    total = sum(size for _, size in sizes)
    if total <= MAX_REQUEST_INPUT_BYTES:
        return None
    parts = ", ".join(f"{t.name} {t.dtype} {list(t.dims)}: {format_bytes(size)}"
                      for t, size in sorted(sizes, key=lambda item: -item[1])[:3])
    return (f"one request's inputs take at least {format_bytes(total)} (batch 1, -1 dimensions at 1 element; "
            f"{parts}), more than the {format_bytes(MAX_REQUEST_INPUT_BYTES)} Triton accepts in one HTTP request "
            f"(--http-max-input-size's default; a gRPC message at most 2 GiB less 1 byte)")
