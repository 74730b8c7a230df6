"""What a GPU-specific artifact was built for (``built_for:``): the GPU model and, for a TensorRT plan, the
TensorRT version.

Why: a TensorRT plan (``model.plan``) is compiled for one GPU and one TensorRT release. NVIDIA's TensorRT
developer guide: by default an engine is only compatible with the type of device where it was built, and a
serialized engine is only valid with the TensorRT version that built it. Elsewhere tritonserver fails to
load it, at deploy time, on the node. The same holds for any artifact compiled for one GPU (an AOTInductor
``.pt2``, an ONNX model whose TensorRT execution provider ships its engine cache): such a model declares
``built_for.gpu`` too.

The compiler cannot read either fact from the plan file: the artifact lives in S3 and the compiler never
touches the network (docs/concepts/decisions.md). So it is declared, next to the artifact it describes,
and checked where it matters: the model is placed only on instance types with that GPU
(plan/triton/built_for.py), served by the Triton release whose TensorRT is that version, and measured
figures must come from that GPU (a plan built for an A10G was not measured on an L4).
"""

from __future__ import annotations

from typing import Annotated, Optional

from pydantic import Field

from .profiles import CPU, GpuModel
from .tensors import Frozen
from .values import FieldProblem

TENSORRT_VERSION = r"^[0-9]{1,2}\.[0-9]{1,3}(\.[0-9]{1,3}){0,2}$"
BUILT_FOR_EXAMPLE = "built_for: {gpu: a10g, tensorrt: 10.7.0}"


class BuiltForSpec(Frozen):
    """The GPU (and TensorRT release) an artifact was compiled for; it runs nowhere else."""

    gpu: Annotated[GpuModel, Field(description="the GPU model the artifact was built on (a GPU key of the instance "
                                              "catalogue, e.g. a10g); it is placed only on instance types with it")]
    # A TensorRT plan's builder version, as `trtexec --version` or tensorrt.__version__ printed it when it was
    # built: major.minor at least (10.7 matches 10.7.0.23), as precise as known. None: not a TensorRT plan.
    tensorrt: Annotated[Optional[str], Field(pattern=TENSORRT_VERSION, description=(
        "the TensorRT version that built the plan, e.g. 10.7.0 (major.minor at least); the server runs the Triton "
        "release shipping it"))] = None


def tensorrt_parts(version: str) -> tuple[int, ...]:
    """``10.7.0`` -> (10, 7, 0)."""
    return tuple(int(part) for part in version.split("."))


def check_built_for(model) -> None:  # a ClassicModelSpec (typed loosely: models.py imports this module)
    """A TensorRT plan declares both facts; only a TensorRT plan has a TensorRT version; a GPU artifact has no
    CPU placement; and its measured figures come from its own GPU."""
    built = model.built_for
    if model.framework == "tensorrt" and (built is None or built.tensorrt is None):
        raise FieldProblem(("built_for",) if built is not None else ("framework",), "a TensorRT plan loads only on the GPU model "
                           "and with the TensorRT version that built it; this model does not say which",
                           f"declare them, e.g. {BUILT_FOR_EXAMPLE} (`trtexec --version` and nvidia-smi on the build "
                           "machine print both)")
    if built is None:
        return
    if built.tensorrt is not None and model.framework != "tensorrt":
        raise FieldProblem(("built_for", "tensorrt"), f"a {model.framework} model is not a TensorRT plan",
                           "drop built_for.tensorrt (built_for.gpu alone pins a GPU-specific artifact)")
    if model.device == "cpu":
        raise FieldProblem(("device",), f"the artifact is built for a {built.gpu} GPU (built_for.gpu): it cannot run "
                           "on KIND_CPU instances", "drop device: cpu, or serve a CPU build without built_for")
    measured_on = model.profile.measured_on
    if model.profile.measured and measured_on not in (built.gpu, CPU):
        raise FieldProblem(("profile", "measured_on"), f"the profile was measured on {measured_on}, but the artifact "
                           f"is built for {built.gpu} and runs nowhere else", f"measure it on {built.gpu} and write "
                           f"measured_on: {built.gpu}")


def version_matches(declared: str, shipped: str) -> bool:
    """Whether a release shipping TensorRT ``shipped`` (10.7.0.23) runs a plan built with ``declared`` (10.7.0):
    every part declared equals the shipped one's."""
    want, have = tensorrt_parts(declared), tensorrt_parts(shipped)
    return have[:len(want)] == want
