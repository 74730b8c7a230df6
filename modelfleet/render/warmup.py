"""``model_warmup`` of a Triton model's config (plan/warmup.py decides the shapes; this writes the message).

Two requests of zeros, each run twice: at batch 1 and at ``max_batch_size`` (a model without batching: its one
shape). Zeros are a valid value of every numeric input (a token id, a pixel, a feature), and deterministic.
A stateful model also gets its sequence batcher's control inputs, READY 0: the backend is exercised (its stub,
its first execution) while the model's code sees empty slots and keeps no state.
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from ..plan.types import TritonModelPlan

RUNS = 2  # the first run initialises, the second proves the initialised path answers
CONTROLS = (("START", mc.TYPE_INT32), ("END", mc.TYPE_INT32), ("READY", mc.TYPE_INT32), ("CORRID", mc.TYPE_UINT64))


def _inputs(warmup: mc.ModelWarmup, plan: TritonModelPlan) -> None:
    for tensor, dims in zip(plan.inputs, plan.warmup_dims):
        entry = warmup.inputs[tensor.name]
        entry.data_type = mc.DataType.Value(tensor.data_type)
        entry.dims.extend(dims)
        entry.zero_data = True
    if plan.sequence is not None:
        for name, data_type in CONTROLS:
            control = warmup.inputs[name]
            control.data_type = data_type
            control.dims.append(1)
            control.zero_data = True


def model_warmup(config: mc.ModelConfig, plan: TritonModelPlan) -> None:
    """Append the warmup requests to ``config`` (none when the plan has no warmup shapes)."""
    if not plan.warmup_dims:
        return
    sizes = sorted({1, plan.max_batch_size}) if plan.max_batch_size > 0 else [1]
    for batch in sizes:
        warmup = config.model_warmup.add(name=f"batch-{batch}", batch_size=batch, count=RUNS)
        _inputs(warmup, plan)
