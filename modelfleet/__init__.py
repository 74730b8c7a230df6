"""modelfleet: compile models.yaml into EKS GPU node groups, Triton model repositories and vLLM settings.

The public surface: load, compile, render. The core never imports pulumi or boto3 and does no network I/O.
"""

# Ctrl-C is one line and exit code 130 at every instant of a run of the program (modelfleet.cli). When modelfleet
# *is* the program (`python -m modelfleet`, or its `modelfleet` script), these lines are the first of its code to
# run, before about a second of imports: until the command starts, Ctrl-C writes the line and exits at once
# (nothing is written yet; os._exit, so no KeyboardInterrupt surfaces inside an import). They use only modules
# the interpreter has already loaded, so no import can be interrupted before the handler is in place. Imported
# as a library, nothing changes.
import os as _os
import sys as _sys

import _signal

INTERRUPTED = {"command": "modelfleet", "said": False}  # cli.main names the command and records the line


def _exit_interrupted(signum: int, frame: object) -> None:
    for stream in (_sys.stdout, _sys.stderr):
        try:
            stream.flush()
        except BaseException:  # e.g. the signal came in the middle of a write to it
            pass
    if not INTERRUPTED["said"]:
        _os.write(2, f"{INTERRUPTED['command']}: interrupted\n".encode())
    _os._exit(128 + _signal.SIGINT)


# The installed script, or python -m (argv[0] is "-m" while the package is located and imported), without a
# function call before the handler is in place.
_argv = list(getattr(_sys, "orig_argv", ()))
_m = _argv.index("-m") if "-m" in _argv else -2
if (_sys.argv[:1] == ["-m"] and ("-mmodelfleet" in _argv or _argv[_m + 1:_m + 2] == ["modelfleet"])) \
        or _os.path.basename(_sys.argv[0] if _sys.argv else "") == "modelfleet":
    _signal.signal(_signal.SIGINT, _exit_interrupted)
del _argv, _m


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
