"""Running the real Pulumi program (__main__.py) under the SDK's mocks: no AWS account, no Pulumi CLI.

An edge adapter (it imports pulumi): the compiler core never imports it. The mocks answer like AWS would
in shape (ids, ARNs, auto-names, the existing cluster's endpoint), and a recording monitor keeps every
resource with its inputs, parent and options, so ``modelfleet preview`` can show what ``pulumi up`` would
create and tests can check it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import runpy
import sys
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pulumi
from google.protobuf import json_format
from pulumi.runtime.settings import SETTINGS

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
    aliases: tuple[dict[str, Any], ...] = ()  # alias specs, e.g. {"noParent": True}
    depends_on: tuple[str, ...] = ()
    custom: bool = True
    retain_on_delete: bool = False


@dataclass
class PreviewResult:
    stack: str
    resources: list[Recorded] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    exported: tuple[str, ...] = ()  # every export, including those only known after a real deploy
    messages: list[tuple[str, str]] = field(default_factory=list)  # (level, text) the program logged
    error: str | None = None


class _Collect(logging.Handler):
    def __init__(self, result: PreviewResult) -> None:
        super().__init__(logging.DEBUG)
        self.result = result

    def emit(self, record: logging.LogRecord) -> None:
        self.result.messages.append((record.levelname.lower(), record.getMessage()))


def _logger(result: PreviewResult) -> logging.Logger:
    """What the program logs (pulumi.log.warn...) is kept for the caller, not printed as it happens."""
    logger = logging.Logger(f"modelfleet.preview.{result.stack}", logging.INFO)
    logger.addHandler(_Collect(result))
    return logger


# The type tokens of the kubernetes provider's resources: objects, the HF token's Secret, the prerequisites' Helm
# releases (the provider itself is "pulumi:providers:kubernetes")
KUBERNETES_OBJECTS = "kubernetes:"
IDENTITY = ("apiVersion", "kind", "metadata")


def kubernetes_state(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """What the mocks answer for a Kubernetes object (or a Helm release): its identity (apiVersion, kind,
    metadata; a release has none), not the whole object echoed back as the provider's state. The program reads
    no output of these resources (they are dependencies and children: components/kubernetes.py, prerequisites.py,
    vllm_deployment.py's Secret), and the preview shows the inputs each was registered
    with (RecordingMonitor), so nothing the program or the preview sees changes. What does change: the SDK no
    longer deserializes every manifest for the mocks, nor a second copy of it as outputs, nor walks it for
    unknowns (at 1,000 models, about 10% of the preview). A component that comes to read an object's spec or
    status would see it unknown here, as a preview with the real provider shows a created object's status."""
    return {key: inputs[key] for key in IDENTITY if key in inputs}


class FleetMocks(pulumi.runtime.Mocks):
    """``live``: node groups the cluster runs already, as EKS describes them (default: none, a first deploy);
    ``clusters``: the EKS clusters that exist (default: the one a joining stack names)."""

    def __init__(self, region: str, live: Sequence[Mapping[str, Any]] = (), clusters: Sequence[str] | None = None,
                 version: str = "1.33") -> None:
        self.region, self.live, self.clusters = region, {g["nodeGroupName"]: g for g in live}, clusters
        self.version = version  # the existing cluster's Kubernetes version

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        if args.typ.startswith(KUBERNETES_OBJECTS):
            return f"{args.name}-id", kubernetes_state(args.inputs)
        state = dict(args.inputs)
        service = args.typ.split(":")[1].split("/")[0]
        state.setdefault("arn", f"arn:aws:{service}:{self.region}:{FAKE_ACCOUNT}:{args.name}")
        if args.typ == "aws:s3/bucket:Bucket":
            state.setdefault("bucket", args.name)
        if args.typ == "aws:ec2/launchTemplate:LaunchTemplate":
            state["latestVersion"] = 1
        if "nodeGroupNamePrefix" in state:  # the provider's auto-name: the prefix and a unique suffix
            state["nodeGroupName"] = f"{state['nodeGroupNamePrefix']}<suffix>"
        return f"{args.name}-id", state

    def subnet_zone(self, subnet_id: str) -> str:
        """A subnet's zone, from its last hex digit (…1 -> a, …2 -> b, …a -> d): distinct for the example
        stacks' subnets and the mocked cluster's own."""
        return f"{self.region}{'abcdef'[(int(subnet_id[-1], 16) - 1) % 6]}"

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list | None]:
        if args.token == "aws:eks/getCluster:getCluster":
            name = args.args.get("name", "cluster")
            return {"name": name, "arn": f"arn:aws:eks:{self.region}:{FAKE_ACCOUNT}:cluster/{name}",
                    "endpoint": f"https://{name}.eks.{self.region}.amazonaws.com",
                    "certificateAuthorities": [{"data": "LS0tLS1CRUdJTi0tLS0t"}], "version": self.version,
                    "vpcConfig": {"subnetIds": ["subnet-0private0a", "subnet-0private0b", "subnet-0private0c"]}}, []
        if args.token == "aws:ec2/getSubnet:getSubnet":
            return {"id": args.args["id"], "availabilityZone": self.subnet_zone(args.args["id"])}, []
        if args.token == "aws:eks/getClusters:getClusters":
            return {"id": self.region, "names": list(self.clusters or [])}, []
        if args.token == "aws:eks/getNodeGroups:getNodeGroups":
            return {"id": args.args["clusterName"], "clusterName": args.args["clusterName"], "names": sorted(self.live)}, []
        if args.token == "aws:eks/getNodeGroup:getNodeGroup":
            return dict(self.live[args.args["nodeGroupName"]], clusterName=args.args["clusterName"]), []
        return {}, []


class RecordingMonitor(pulumi.runtime.mocks.MockMonitor):
    """Keeps what the mocks do not: parents, resource options, dependencies."""

    def __init__(self, mocks: FleetMocks, result: PreviewResult) -> None:
        super().__init__(mocks)
        self.result = result

    def RegisterResource(self, request: Any) -> Any:
        # the mocks see a Kubernetes object's identity only (kubernetes_state); the record keeps it whole
        response = super().RegisterResource(_identity_only(request) if request.type.startswith(KUBERNETES_OBJECTS)
                                            else request)
        inputs = _whole(json_format.MessageToDict(request.object)) if request.object else {}
        self.result.resources.append(Recorded(
            request.type, request.name, response.urn, request.parent, inputs, bool(request.protect),
            tuple(request.ignoreChanges), tuple(json_format.MessageToDict(a.spec) for a in request.aliases),
            tuple(request.dependencies), bool(request.custom), bool(getattr(request, "retainOnDelete", False))))
        return response


def _identity_only(request: Any) -> Any:
    """A copy of a registration whose object holds only the IDENTITY fields."""
    trimmed = type(request)()
    trimmed.CopyFrom(request)
    trimmed.object.Clear()
    for key in IDENTITY:
        if key in request.object.fields:
            trimmed.object.fields[key].CopyFrom(request.object.fields[key])
    return trimmed


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


@contextmanager
def _program_context(project_dir: str, environ: dict[str, str]) -> Iterator[dict[str, Any]]:
    """cwd, sys.path and environment as `pulumi up` gives them; exports captured instead of sent."""
    cwd, path, real_export = os.getcwd(), list(sys.path), pulumi.export
    saved = {k: os.environ.get(k) for k in environ}
    exports: dict[str, Any] = {}
    os.chdir(project_dir)
    sys.path.insert(0, project_dir)
    os.environ.update(environ)
    pulumi.export = lambda name, value: exports.__setitem__(name, value)  # type: ignore[assignment]
    try:
        yield exports
    finally:
        pulumi.export = real_export
        os.chdir(cwd)
        sys.path[:] = path
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)


class _Outputs:
    """Stands in for the SDK's list of pending outputs (``SETTINGS.outputs``, a deque in SDKs before 3.23x; later
    ones keep a set): such an SDK removes every resolved output from it by a linear scan, quadratic in the
    program's outputs (at 1,000 models most of the preview's time). Same operations, each O(1): removal only forgets the item, and ``popleft`` skips
    what was forgotten."""

    def __init__(self) -> None:
        self._order: deque[Any] = deque()
        self._live: set[Any] = set()

    def append(self, item: Any) -> None:
        self._order.append(item)
        self._live.add(item)

    def remove(self, item: Any) -> None:
        if item not in self._live:
            raise ValueError(item)
        self._live.remove(item)

    def popleft(self) -> Any:
        while True:
            item = self._order.popleft()
            if item in self._live:
                self._live.remove(item)
                return item

    def clear(self) -> None:
        self._order.clear()
        self._live.clear()

    def __len__(self) -> int:
        return len(self._live)


def run_program(project_dir: str, stack: str, config: dict[str, Any], secrets: dict[str, str] | None = None,
                environ: dict[str, str] | None = None, mocks: FleetMocks | None = None, dry_run: bool = True) -> PreviewResult:
    """Run ``<project_dir>/__main__.py`` for ``stack`` under mocks and return what it registered.
    ``environ``: extra environment variables for the program (e.g. MODELFLEET_MODELS); ``mocks``: what AWS
    answers (default: a first deploy into an existing cluster); ``dry_run``: False runs it as `pulumi up`."""
    result = PreviewResult(stack)
    _usable_event_loop()
    mocks = mocks or FleetMocks(str(config.get("aws:region", "us-east-1")))
    pulumi.runtime.set_all_config({**stack_config_strings(config), **(secrets or {})}, list(secrets or {}))
    pulumi.runtime.set_mocks(mocks, project="modelfleet", stack=stack, preview=dry_run, logger=_logger(result),
                             monitor=RecordingMonitor(mocks, result))
    if not isinstance(SETTINGS.outputs, set):  # a deque (SDKs up to 3.22x); later ones keep a set, already O(1)
        SETTINGS.outputs = _Outputs()
    with _program_context(os.path.abspath(project_dir), environ or {}) as exports, _no_source_positions():
        try:
            _run(os.path.join(os.path.abspath(project_dir), "__main__.py"), exports, result)
        except pulumi.RunError as error:
            result.error = str(error)
    return result


@contextmanager
def _no_source_positions() -> Iterator[None]:
    """The SDK walks the Python stack at every resource it registers (``_get_stack_trace``: every frame's file
    read for its line, made a URI) so the engine can show where the resource was declared. Nothing reads
    that under mocks, and at 1,000 models it is about a second of the preview: the walk returns an empty
    trace (as the SDK's own does when it finds no user frame) while the program runs, and is put back after.
    An SDK without the function is left alone."""
    from pulumi.runtime import resource as sdk_resource

    real = getattr(sdk_resource, "_get_stack_trace", None)
    trace = getattr(getattr(sdk_resource, "source_pb2", None), "StackTrace", None)
    if real is None or trace is None:
        yield
        return
    sdk_resource._get_stack_trace = trace
    try:
        yield
    finally:
        sdk_resource._get_stack_trace = real


def _usable_event_loop() -> None:
    """The SDK runs the program on this thread's current event loop. Whoever ran before (an ``asyncio.run``, a
    test that closed its loop) may have left none, or a closed one, which the SDK would use and fail on: start a
    fresh one then, so a preview never depends on what ran before it in the same process."""
    try:
        loop = asyncio.get_event_loop_policy().get_event_loop()
    except RuntimeError:  # set_event_loop(None) was called: there is no current loop
        loop = None
    if loop is None or loop.is_closed():
        asyncio.set_event_loop(asyncio.new_event_loop())


@pulumi.runtime.test
def _run(main: str, exports: dict[str, Any], result: PreviewResult) -> pulumi.Output[Any]:
    """Run the program; resolves once every export has (an export only known after a real deploy is left
    out of ``outputs``, as ``pulumi preview`` shows it)."""
    runpy.run_path(main, run_name="__main__")
    result.exported = tuple(sorted(exports))
    return pulumi.Output.all(*[pulumi.Output.from_input(value).apply(lambda v, k=key: result.outputs.__setitem__(k, v))
                               for key, value in exports.items()])
