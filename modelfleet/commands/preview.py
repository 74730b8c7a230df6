from __future__ import annotations

import argparse
import time
from collections import defaultdict

from ..yamlsource import load_yaml
from . import add_project_arguments, project_from

NAME = "preview"
HELP = "run the Pulumi program under the SDK's mocks and show what `pulumi up` would create (no AWS, no CLI)"

KEY_INPUTS = {
    "aws:eks/nodeGroup:NodeGroup": ("instanceTypes", "capacityType", "amiType", "scalingConfig", "taints"),
    "aws:ec2/launchTemplate:LaunchTemplate": ("metadataOptions",),
    "aws:s3/bucketObjectv2:BucketObjectv2": ("key",),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("policyArn",),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": ("namespace", "serviceAccount"),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser)


def run(args: argparse.Namespace) -> int:
    from ..preview_runner import run_program  # pulumi is imported only by this edge command

    project = project_from(args)
    project.plan(args.stack)  # compile errors are reported like every other command's, located
    config = load_yaml(project.environment_path(args.stack)).data["config"]
    started = time.perf_counter()
    result = run_program(project.root, args.stack, config, {"modelfleet:hfToken": "preview-placeholder-token"})
    if result.error:
        print(result.error)
        return 2
    print(format_preview(result, args.stack, time.perf_counter() - started))
    return 0


def _summary(resource) -> str:
    inputs = resource.inputs
    if resource.type.startswith("kubernetes:") and "metadata" in inputs:
        spec = inputs.get("spec", {})
        extra = f" replicas={spec['replicas']}" if isinstance(spec, dict) and "replicas" in spec else ""
        container = _first_container(inputs)
        if container and container.get("args"):
            extra += f" args: {' '.join(map(str, container['args'][:8]))} ..."
        return extra
    keys = KEY_INPUTS.get(resource.type, ())
    return " " + ", ".join(f"{k}={inputs[k]}" for k in keys if k in inputs) if keys else ""


def _first_container(inputs: dict) -> dict | None:
    spec = inputs.get("spec") or {}
    template = spec.get("template") or (spec.get("leaderWorkerTemplate") or {}).get("leaderTemplate") or {}
    containers = (template.get("spec") or {}).get("containers") or []
    return containers[0] if containers else None


def format_preview(result, stack: str, seconds: float) -> str:
    by_parent = defaultdict(list)
    names = {r.urn: f"{r.type.split(':')[-1]} {r.name}" for r in result.resources}
    for resource in result.resources:
        by_parent[names.get(resource.parent, "stack")].append(resource)
    lines = [f"pulumi up --stack {stack} would create {len(result.resources)} resources "
             f"(offline preview under Pulumi mocks, {seconds:.1f} s):"]
    for parent in sorted(by_parent):
        lines.append(f"\n{parent}:")
        for r in by_parent[parent]:
            flags = " [protected]" if r.protect else ""
            lines.append(f"  + {r.type} {r.name}{flags}{_summary(r)}")
    lines.append("\noutputs:")
    for key, value in sorted(result.outputs.items()):
        lines.append(f"  {key}: {value}")
    return "\n".join(lines)
