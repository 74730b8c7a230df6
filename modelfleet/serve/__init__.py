"""Serving a compiled fleet on this machine's real engines: repository adaptation, runners, stand-ins.

Pure planning and file writing only; starting processes is the edge's job (``modelfleet.commands.serve``,
``modelfleet.engines.tritonserver``).
"""

from .repository import (
    LOCAL_CACHE_CAP_BYTES,
    LocalModel,
    LocalRepository,
    local_artifact_dir,
    local_model_config,
    plan_local_repository,
    write_local_repository,
)
from .vllm_local import local_vllm_args

__all__ = ["LOCAL_CACHE_CAP_BYTES", "LocalModel", "LocalRepository", "local_artifact_dir", "local_model_config",
           "local_vllm_args", "plan_local_repository", "write_local_repository"]
