"""Running the real Pulumi program (__main__.py) under the SDK's mocks: no AWS account, no Pulumi CLI.

An edge adapter (it imports pulumi): the compiler core never imports it. The mocks answer like AWS would
in shape (ids, ARNs, the existing cluster's endpoint), and record every resource with its inputs, parent
and options, so ``modelfleet preview`` can show what ``pulumi up`` would create, and tests can check it.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import json_format

FAKE_ACCOUNT = "123456789012"


@dataclass
class Recorded:
    type: str
    name: str
    urn: str
    parent: str
    inputs: dict[str, Any]
    protect: bool = False
    ignore_changes: tuple[str, ...] = ()
    aliases: int = 0


@dataclass
class PreviewResult:
    resources: list[Recorded] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


class FleetMocks(pulumi.runtime.Mocks):
    def __init__(self, region: str) -> None:
        self.region = region

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        state = dict(args.inputs)
        arn_kind = args.typ.split(":")[1].split("/")[0]
        state.setdefault("arn", f"arn:aws:{arn_kind}:{self.region}:{FAKE_ACCOUNT}:{args.name}")
        if args.typ == "aws:s3/bucket:Bucket":
            state.setdefault("bucket", args.name)
        if args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            state["latestVersion"] = 1
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list | None]:
        if args.token == "aws:eks/getCluster:getCluster":
            name = args.args.get("name", "cluster")
            return {"name": name, "arn": f"arn:aws:eks:{self.region}:{FAKE_ACCOUNT}:cluster/{name}",
                    "endpoint": f"https://{name}.eks.{self.region}.amazonaws.com",
                    "certificateAuthorities": [{"data": "LS0tLS1CRUdJTi0tLS0t"}], "version": "1.33",
                    "vpcConfig": {"subnetIds": ["subnet-private-a", "subnet-private-b", "subnet-private-c"]}}, []
        return {}, []


class RecordingMonitor(pulumi.runtime.mocks.MockMonitor):
    """Keeps what the mocks do not: parents, resource options, and the stack's outputs."""

    def __init__(self, mocks: FleetMocks, result: PreviewResult) -> None:
        super().__init__(mocks)
        self.result = result

    def RegisterResource(self, request: Any) -> Any:
        response = super().RegisterResource(request)
        if request.custom or request.type.startswith("modelfleet:"):
            inputs = _whole(json_format.MessageToDict(request.object)) if request.object else {}
            self.result.resources.append(Recorded(
                request.type, request.name, response.urn, request.parent, inputs, bool(request.protect),
                tuple(request.ignoreChanges), len(request.aliases)))
        return response


def _whole(value: Any) -> Any:
    """protobuf Structs carry every number as a float; show 4, not 4.0."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _whole(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_whole(v) for v in value]
    return value


def stack_config_strings(config: dict[str, Any]) -> dict[str, str]:
    """Config as Pulumi passes it to a program: strings, structured values as JSON."""
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def run_program(project_dir: str, stack: str, config: dict[str, Any], secrets: dict[str, str] | None = None) -> PreviewResult:
    """Run ``<project_dir>/__main__.py`` for ``stack`` under mocks and return what it registered."""
    result = PreviewResult()
    mocks = FleetMocks(str(config.get("aws:region", "us-east-1")))
    all_config = {**stack_config_strings(config), **(secrets or {})}
    pulumi.runtime.set_all_config(all_config, list(secrets or {}))
    pulumi.runtime.set_mocks(mocks, project="modelfleet", stack=stack, preview=True,
                             monitor=RecordingMonitor(mocks, result))
    cwd, path = os.getcwd(), list(sys.path)
    os.chdir(project_dir)
    sys.path.insert(0, project_dir)
    real_export = pulumi.export
    exports: dict[str, Any] = {}
    pulumi.export = lambda name, value: exports.__setitem__(name, value)  # type: ignore[assignment]
    try:
        _run(os.path.join(project_dir, "__main__.py"), exports, result)
    except pulumi.RunError as error:
        result.error = str(error)
    finally:
        pulumi.export = real_export
        os.chdir(cwd)
        sys.path[:] = path
    return result


@pulumi.runtime.test
def _run(main: str, exports: dict[str, Any], result: PreviewResult) -> pulumi.Output[None]:
    """Run the program; the returned Output resolves once every export has (the mocks' test runner waits)."""
    runpy.run_path(main, run_name="__main__")
    return pulumi.Output.all(**exports).apply(result.outputs.update)
