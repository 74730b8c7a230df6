"""A pipeline's ensemble ``config.pbtxt`` through Triton's protobuf schema, and its (empty) version folder.

An ensemble has no weights, but Triton loads a model only from a numbered version folder, so the render
writes ``<pipeline>/1/`` with a note in it (a model repository in S3 has no empty folders).
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from ..plan.types import PipelinePlan, TensorPlan

VERSION_NOTE = ("This version folder is the ensemble's: Triton loads models only from numbered version folders, "
                "and an ensemble has no files of its own.\n")


def _tensor(message: mc.ModelInput | mc.ModelOutput, tensor: TensorPlan) -> None:
    message.name = tensor.name
    message.data_type = mc.DataType.Value(tensor.data_type)
    message.dims.extend(tensor.dims)


def ensemble_config(plan: PipelinePlan) -> mc.ModelConfig:
    """``platform: "ensemble"`` with one step per pipeline step, in running order, each at the version the plan
    pins (-1, Triton's latest, only for a model that pins none)."""
    config = mc.ModelConfig(name=plan.name, platform="ensemble", max_batch_size=plan.max_batch_size)
    config.version_policy.latest.num_versions = 1
    for tensor in plan.inputs:
        _tensor(config.input.add(), tensor)
    for tensor in plan.outputs:
        _tensor(config.output.add(), tensor)
    for step in plan.steps:
        message = config.ensemble_scheduling.step.add(model_name=step.model, model_version=step.model_version)
        for model_input, tensor in step.input_map:
            message.input_map[model_input] = tensor
        for model_output, tensor in step.output_map:
            message.output_map[model_output] = tensor
    return config
