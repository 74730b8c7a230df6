"""modelfleet: compile models.yaml into EKS GPU node groups, Triton model repositories and vLLM settings.

The public surface: load, compile, render. The core never imports pulumi or boto3 and does no network I/O.
"""

from .errors import CompileError, Issue, ModelfleetError, SpecError
from .plan.compiler import compile_fleet
from .plan.hardware.instances import InstanceCatalogue, load_instance_catalogue
from .plan.types import FleetPlan, NodeGroupPlan, TritonModelPlan, TritonServerPlan, VllmModelPlan
from .render.fleet import render_fleet, write_tree
from .spec.environment import EnvironmentSpec, load_environment, parse_environment
from .spec.load import apply_environment, load_fleet, model_schema, parse_fleet_text
from .spec.models import ClassicModelSpec, FleetSpec, LlmModelSpec

__all__ = [
    "ClassicModelSpec", "CompileError", "EnvironmentSpec", "FleetPlan", "FleetSpec", "InstanceCatalogue", "Issue",
    "LlmModelSpec", "ModelfleetError", "NodeGroupPlan", "SpecError", "TritonModelPlan", "TritonServerPlan",
    "VllmModelPlan", "apply_environment", "compile_fleet", "load_environment", "load_fleet",
    "load_instance_catalogue", "model_schema", "parse_environment", "parse_fleet_text", "render_fleet", "write_tree",
]
