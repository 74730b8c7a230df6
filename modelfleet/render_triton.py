"""config.pbtxt through Triton's own protobuf schema (``model_config_pb2.ModelConfig``), never templates."""

from __future__ import annotations

import json

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from .plan import TensorPlan, TritonModelPlan, VllmModelPlan


def _tensor(message: mc.ModelInput | mc.ModelOutput, tensor: TensorPlan) -> None:
    message.name = tensor.name
    message.data_type = mc.DataType.Value(tensor.data_type)
    message.dims.extend(tensor.dims)


def model_config(plan: TritonModelPlan) -> mc.ModelConfig:
    """The ModelConfig message: batching, REJECT queue policy with a timeout, cache, instances, versions."""
    config = mc.ModelConfig(name=plan.name, backend=plan.backend, max_batch_size=plan.max_batch_size)
    if plan.platform:
        config.platform = plan.platform
    for tensor in plan.inputs:
        _tensor(config.input.add(), tensor)
    for tensor in plan.outputs:
        _tensor(config.output.add(), tensor)
    config.instance_group.add(kind=mc.ModelInstanceGroup.KIND_GPU, count=plan.instance_count)
    batching = config.dynamic_batching
    batching.max_queue_delay_microseconds = plan.max_queue_delay_us
    policy = batching.default_queue_policy
    policy.timeout_action = mc.ModelQueuePolicy.REJECT
    policy.default_timeout_microseconds = plan.queue_timeout_us
    policy.allow_timeout_override = True  # a client may only lower it; a tighter deadline is always fine
    policy.max_queue_size = plan.max_queue_size
    config.response_cache.enable = plan.response_cache
    if plan.versions:
        config.version_policy.specific.versions.extend(plan.versions)
    else:
        config.version_policy.latest.num_versions = 1
    return config


def vllm_backend_config(plan: VllmModelPlan) -> mc.ModelConfig:
    """Triton's vLLM backend: no batching dims, decoupled streaming, one KIND_MODEL instance."""
    config = mc.ModelConfig(name=plan.name, backend="vllm", max_batch_size=0)
    config.model_transaction_policy.decoupled = True
    config.instance_group.add(kind=mc.ModelInstanceGroup.KIND_MODEL, count=1)
    config.version_policy.latest.num_versions = 1
    return config


def vllm_backend_model_json(plan: VllmModelPlan) -> str:
    """``1/model.json``: the same engine settings as the vllm serve arguments, as vLLM engine args."""
    engine = {
        "model": plan.artifact, "served_model_name": plan.name, "tensor_parallel_size": plan.tensor_parallel_size,
        "max_model_len": plan.max_model_len, "max_num_seqs": plan.max_num_seqs,
        "gpu_memory_utilization": plan.gpu_memory_utilization, "dtype": plan.args[plan.args.index("--dtype") + 1],
        "kv_cache_dtype": plan.kv_cache_dtype, "enable_prefix_caching": "--enable-prefix-caching" in plan.args,
    }
    return json.dumps(engine, indent=2, sort_keys=True) + "\n"


def render_config(config: mc.ModelConfig) -> str:
    return text_format.MessageToString(config)


def parse_config(text: str) -> mc.ModelConfig:
    """Parse a config.pbtxt with Triton's schema (an unknown field or enum raises ParseError)."""
    return text_format.Parse(text, mc.ModelConfig())
