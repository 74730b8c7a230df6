"""``model_warmup`` of a Triton model's config (plan/triton/warmup.py decides the shapes; this writes the message),
and the sample files it reads (``<model>/warmup/<input>``).

Requests each run twice: at batch 1, 2, 4, ... and ``max_batch_size`` (a model without batching: its one
shape). An input with a sample (``warmup: {inputs: ...}``) reads it from ``input_data_file``, which Triton
resolves inside the model's ``warmup/`` folder and repeats for every item of the batch; the others are zeros,
a valid value of every numeric input (a token id, a pixel, a feature), and deterministic. A string sample is
written as Triton serialises a string tensor: each element a 4-byte little-endian length, then its bytes.
A stateful model also gets its sequence batcher's control inputs, READY 0: the backend is exercised (its stub,
its first execution) while the model's code sees empty slots and keeps no state.
"""

from __future__ import annotations

import base64
import math
import struct

from tritonclient.grpc import model_config_pb2 as mc

from ..plan.types import TritonModelPlan, WarmupSamplePlan

RUNS = 2  # the first run initialises, the second proves the initialised path answers
CONTROLS = (("START", mc.TYPE_INT32), ("END", mc.TYPE_INT32), ("READY", mc.TYPE_INT32), ("CORRID", mc.TYPE_UINT64))


WARMUP_FOLDER = "warmup"  # Triton's kWarmupDataFolder: input_data_file is read from <model>/warmup/


def _inputs(warmup: mc.ModelWarmup, plan: TritonModelPlan) -> None:
    sampled = {s.input for s in plan.warmup_samples}
    for tensor, dims in zip(plan.inputs, plan.warmup_dims):
        entry = warmup.inputs[tensor.name]
        entry.data_type = mc.DataType.Value(tensor.data_type)
        entry.dims.extend(dims)
        if tensor.name in sampled:
            entry.input_data_file = tensor.name
        else:
            entry.zero_data = True
    if plan.sequence is not None:
        for name, data_type in CONTROLS:
            control = warmup.inputs[name]
            control.data_type = data_type
            control.dims.append(1)
            control.zero_data = True


def batch_sizes(max_batch_size: int) -> list[int]:
    """1, 2, 4, ... and max_batch_size itself: the dynamic batcher forms batches of any size up to its max, and
    a backend initialises per shape (memory arenas grow, kernels are chosen), so each power of two is run once
    before a client can send one (the largest at most 13 shapes: max_batch_size is at most 4,096)."""
    if max_batch_size <= 0:
        return [1]
    return sorted({2**i for i in range(max_batch_size.bit_length()) if 2**i <= max_batch_size} | {max_batch_size})


def model_warmup(config: mc.ModelConfig, plan: TritonModelPlan) -> None:
    """Append the warmup requests to ``config`` (none when the plan has no warmup shapes)."""
    if not plan.warmup_dims:
        return
    sizes = batch_sizes(plan.max_batch_size)
    for batch in sizes:
        warmup = config.model_warmup.add(name=f"batch-{batch}", batch_size=batch, count=RUNS)
        _inputs(warmup, plan)


def sample_file(plan: TritonModelPlan, sample: WarmupSamplePlan) -> bytes:
    """The file Triton reads for ``sample``'s input: the values as given, or a string input's element
    serialised once per element of its warmup shape."""
    content = base64.b64decode(sample.content_base64)
    index = next(i for i, t in enumerate(plan.inputs) if t.name == sample.input)
    if plan.inputs[index].data_type != "TYPE_STRING":
        return content
    return (struct.pack("<I", len(content)) + content) * math.prod(plan.warmup_dims[index])


def warmup_files(plan: TritonModelPlan) -> dict[str, bytes]:
    """Path inside the model's directory -> content, for every sample its warmup reads."""
    if not plan.warmup_dims:
        return {}
    return {f"{WARMUP_FOLDER}/{s.input}": sample_file(plan, s) for s in plan.warmup_samples}
