"""Warmup samples in models.yaml: ``warmup: {inputs: {image_bytes: samples/cat.ppm}}``.

Why: Triton warms a model with zeros unless told otherwise, and zeros are no valid image or sentence: a
model with a string input (encoded bytes its code decodes) cannot be warmed without a real sample, and a
failed warmup fails the model's load. So such a model names one representative value per input, a file
committed beside models.yaml; the compiler ships it in the model repository (``<model>/warmup/<input>``,
Triton's ``input_data_file``) and the server runs it before it reports ready (plan/triton/warmup.py).

A sample holds one element of a string input (the raw bytes: the image file itself), or one request's
worth of a numeric input: the row-major little-endian values of its typical shape (``dims`` with each -1 at
its ``typical_dims``), e.g. ``np.zeros((3, 224, 224), '<f4').tofile(FILE)``. Inputs without a sample are
warmed with zeros, as before.

The loader reads the files (``load.read_warmup_samples``) and hands their bytes to validation under
``SAMPLES_CONTEXT``, as it does for an LLM's config.json.
"""

from __future__ import annotations

import hashlib
from typing import Annotated

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from .tensors import LIST, Frozen
from .values import FieldProblem

SAMPLES_CONTEXT = "warmup_samples"
SAMPLE_PATH = r"^[A-Za-z0-9_][A-Za-z0-9._/-]{0,1023}$"
# A sample is one representative request, not a data set; it travels in plan.json (base64) and in the model
# repository of every server holding the model. A full-size photo is a few MiB.
MAX_SAMPLE_BYTES = 8 * 1024 * 1024
TensorName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_.:\-]*$", max_length=128)]
SamplePath = Annotated[str, Field(pattern=SAMPLE_PATH, max_length=1024, description=(
    "a file beside models.yaml (a relative path, no '..') holding one representative value of the input"))]


class WarmupSpec(Frozen):
    """Per input, the file holding a representative value Triton warms the model with."""

    inputs: Annotated[dict[TensorName, SamplePath], Field(**LIST, min_length=1, max_length=256, description=(
        "input name -> sample file beside models.yaml: a string input's one element (e.g. the image file), or a "
        "numeric input's raw little-endian values of its typical shape"))]
    _samples: dict[str, bytes] | None = PrivateAttr(default=None)

    @field_validator("inputs")
    @classmethod
    def _inside(cls, value: dict[str, str]) -> dict[str, str]:
        for name, path in value.items():
            if ".." in path.split("/"):
                raise FieldProblem((name,), f"{path} leaves the directory of models.yaml", "commit the sample "
                                   "beside models.yaml (e.g. samples/<model>/<input>) and write its path from there")
        return value

    @model_validator(mode="after")
    def _read(self, info: ValidationInfo) -> WarmupSpec:
        if self._samples is not None:  # an instance validated again (an environment's merge): read once
            return self
        read = (info.context or {}).get(SAMPLES_CONTEXT, {})
        samples = {}
        for name, path in self.inputs.items():
            content = read.get(path)
            if content is None:
                raise FieldProblem(("inputs", name), f"{path} was not read", "load the catalogue with the loader "
                                   "(modelfleet.load_fleet), which reads the sample files it names")
            if isinstance(content, str):
                raise FieldProblem(("inputs", name), content, f"commit the sample at {path}, next to models.yaml")
            samples[name] = content
        self._samples = samples
        return self

    def sample(self, name: str) -> bytes | None:
        """The bytes of the input's sample (None: the input has none)."""
        if self._samples is None:
            raise ValueError("the warmup samples were not read by the loader")
        return self._samples.get(name)


def sample_digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def check_warmup(model) -> None:  # a ClassicModelSpec (typed loosely: models.py imports this module)
    """Every sample names an input of the model, and a numeric one holds exactly one request's values."""
    if model.warmup is None:
        return
    by_name = {t.name: t for t in model.inputs}
    for name in model.warmup.inputs:
        tensor = by_name.get(name)
        if tensor is None:
            raise FieldProblem(("warmup", "inputs", name), f"{name} is not an input of {model.name}",
                               f"name one of its inputs: {', '.join(by_name)}")
        expected = request_bytes(tensor)
        got = len(model.warmup.sample(name))
        if expected is not None and got != expected:
            shape = list(typical_shape(tensor))
            raise FieldProblem(("warmup", "inputs", name), f"the sample holds {got:,} bytes; one {tensor.dtype} "
                               f"{shape} request is {expected:,}", "write its raw little-endian values row by row, "
                               f"e.g. np.asarray(values, '{_NUMPY[tensor.dtype]}').reshape({shape}).tofile(FILE)")


ELEMENT_BYTES = {"bool": 1, "uint8": 1, "int8": 1, "uint16": 2, "int16": 2, "fp16": 2, "bf16": 2, "uint32": 4,
                 "int32": 4, "fp32": 4, "uint64": 8, "int64": 8, "fp64": 8}
_NUMPY = {"bool": "?", "uint8": "u1", "int8": "i1", "uint16": "<u2", "int16": "<i2", "fp16": "<f2", "bf16": "<u2",
          "uint32": "<u4", "int32": "<i4", "fp32": "<f4", "uint64": "<u8", "int64": "<i8", "fp64": "<f8"}
TYPICAL_DIM = 16  # a -1 without typical_dims (plan/triton/warmup.py says why)


def typical_shape(tensor) -> tuple[int, ...]:
    """The input's shape in a representative request: its typical_dims, else each -1 at TYPICAL_DIM."""
    return tuple(tensor.typical_dims or (TYPICAL_DIM if d == -1 else d for d in tensor.dims))


def request_bytes(tensor) -> int | None:
    """Bytes of one request's values of a numeric input (None: a string input, whose element is any length)."""
    if tensor.dtype == "string":
        return None
    count = 1
    for dim in typical_shape(tensor):
        count *= dim
    return count * ELEMENT_BYTES[tensor.dtype]
