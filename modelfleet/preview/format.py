"""What ``modelfleet preview`` prints: the resources as a tree of components, each with its key inputs,
then the stack outputs. Formatting only (the runner is runner.py)."""

from __future__ import annotations

import json
import shlex
from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import yaml

SIG_KEY, SECRET_SIG = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"  # a secret on the wire

Summary = Callable[[dict[str, Any]], str]


def is_secret(value: Any) -> bool:
    """Whether an input was sent as a Pulumi secret (kept encrypted in state, masked in output)."""
    return isinstance(value, dict) and value.get(SIG_KEY) == SECRET_SIG


def short_type(token: str) -> str:
    """``aws:eks/nodeGroup:NodeGroup`` -> ``aws:eks:NodeGroup``; ``kubernetes:apps/v1:Deployment`` -> ``k8s:Deployment``."""
    package, module, kind = token.split(":")
    if package == "pulumi" and module == "providers":
        return f"provider:{kind}"
    if package == "kubernetes":
        return f"k8s:{kind}"
    return f"{package}:{module.split('/')[0]}:{kind}" if package not in ("modelfleet", "pulumi") else kind


def _node_group(i: dict[str, Any]) -> str:
    scaling, taints = i.get("scalingConfig", {}), i.get("taints", [])
    taint = ", ".join(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in taints)
    return (f"{','.join(i.get('instanceTypes', []))} {i.get('capacityType')} {i.get('amiType')}, nodes "
            f"{scaling.get('minSize')}/{scaling.get('desiredSize')}/{scaling.get('maxSize')} (min/desired/max), "
            + (f"taint {taint}" if taint else "no taint"))


def _launch_template(i: dict[str, Any]) -> str:
    meta = i.get("metadataOptions", {})
    disks = [f"{d['ebs']['volumeSize']} GiB {d['ebs']['volumeType']} at {d['ebs'].get('throughput', 125)} MiB/s, "
             f"{d['ebs'].get('iops', 3000)} IOPS on {d['deviceName']}" for d in i.get("blockDeviceMappings", [])]
    return f"IMDS tokens {meta.get('httpTokens')}, hop limit {meta.get('httpPutResponseHopLimit')}; {', '.join(disks)}"


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _policy(i: dict[str, Any]) -> str:
    """S3 reads as the prefixes they reach; anything else as its actions and the condition that scopes them."""
    document = json.loads(i["policy"]) if isinstance(i.get("policy"), str) else {}
    statements = document.get("Statement", [])
    if all(s.get("Action") in ("s3:GetObject", "s3:ListBucket") for s in statements):
        reads = [r for s in statements if s.get("Action") == "s3:GetObject" for r in s["Resource"]]
        return "read-only: " + ", ".join(r.replace("arn:aws:s3:::", "s3://") for r in reads)
    parts = []
    for statement in statements:
        scope = "; ".join(f"{k}={v}" for test in statement.get("Condition", {}).values() for k, v in test.items())
        parts.append(", ".join(_as_list(statement["Action"])) + (f" where {scope}" if scope else ""))
    return " | ".join(parts)


def _cluster(i: dict[str, Any]) -> str:
    vpc = i.get("vpcConfig", {})
    public = f"public to {', '.join(vpc.get('publicAccessCidrs', []))}" if vpc.get("endpointPublicAccess") else "private only"
    return f"EKS {i.get('name')} version {i.get('version')}, API endpoint {public}"


def _release(i: dict[str, Any]) -> str:
    source = i.get("repositoryOpts", {}).get("repo")
    return f"{i.get('chart')} {i.get('version')}" + (f" from {source}" if source else "") + f" in {i.get('namespace')}"


def _trust(i: dict[str, Any]) -> str:
    document = json.loads(i.get("assumeRolePolicy", "{}"))
    return "assumed by " + ", ".join(p for s in document.get("Statement", []) for p in s["Principal"].values())


def _pod_spec(obj: dict[str, Any]) -> tuple[dict[str, Any], str]:
    spec = obj.get("spec", {})
    if "leaderWorkerTemplate" in spec:
        lws = spec["leaderWorkerTemplate"]
        return lws["leaderTemplate"]["spec"], f"{_count(spec.get('replicas'), 'replica')} x {lws['size']} pods (leader + workers)"
    return spec["template"]["spec"], _count(spec.get("replicas"), "replica")


def _count(number: Any, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _workload(obj: dict[str, Any]) -> str:
    pod, replicas = _pod_spec(obj)
    container = pod["containers"][0]
    gpus = container["resources"]["limits"].get("nvidia.com/gpu")
    line = f"{replicas}, {gpus} GPU/pod on {pod.get('nodeSelector', {}).get('node.kubernetes.io/instance-type')}, {container['image']}"
    command = container.get("command", []) + container.get("args", [])
    shown = command[-1] if command[:2] == ["/bin/sh", "-c"] else shlex.join(command)
    return f"{line}\n$ {shown.strip()}"


def _autoscaler(obj: dict[str, Any]) -> str:
    spec = obj["spec"]
    metrics = []
    for m in spec["metrics"]:
        selector = m["pods"]["metric"].get("selector", {}).get("matchLabels", {})
        labels = ",".join(f"{k}={v}" for k, v in selector.items())
        metrics.append(f"{m['pods']['metric']['name']}{{{labels}}} > {m['pods']['target']['averageValue']}/pod"
                       if labels else f"{m['pods']['metric']['name']} > {m['pods']['target']['averageValue']}/pod")
    return f"{spec['minReplicas']}..{spec['maxReplicas']} replicas on " + ", ".join(metrics)


SUMMARIES: dict[str, Summary] = {
    "aws:eks/nodeGroup:NodeGroup": _node_group,
    "aws:ec2/launchTemplate:LaunchTemplate": _launch_template,
    "aws:iam/rolePolicy:RolePolicy": _policy,
    "aws:iam/role:Role": _trust,
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": lambda i: i.get("policyArn", "").rsplit("/", 1)[-1],
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": lambda i: f"service account {i.get('namespace')}/{i.get('serviceAccount')}",
    "aws:s3/bucketObjectv2:BucketObjectv2": lambda i: f"key {i.get('key')}",
    "aws:s3/bucket:Bucket": lambda i: f"s3://{i.get('bucket')}",
    "aws:eks/cluster:Cluster": _cluster,
    "aws:eks/addon:Addon": lambda i: i.get("addonName", "") + (f" {i['configurationValues']}" if i.get("configurationValues") else ""),
    "kubernetes:helm.sh/v3:Release": _release,
    "kubernetes:apps/v1:Deployment": _workload,
    "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet": _workload,
    "kubernetes:argoproj.io/v1alpha1:Rollout": lambda o: "canary " + " -> ".join(
        f"{s['setWeight']}%" for s in o["spec"]["strategy"]["canary"]["steps"] if "setWeight" in s) + ", " + _workload(o),
    "kubernetes:argoproj.io/v1alpha1:AnalysisTemplate": lambda o: "aborts the canary unless: " + "; ".join(
        f"{m['name']} {m['successCondition'].removeprefix('result[0] ')}" for m in o["spec"]["metrics"]),
    "kubernetes:gateway.networking.k8s.io/v1:HTTPRoute": lambda o: "via " + ", ".join(
        p["name"] for p in o["spec"]["parentRefs"]) + ": " + ", ".join(
        f"{b['name']} {b['weight']}%" for b in o["spec"]["rules"][0]["backendRefs"]),
    "kubernetes:apps/v1:DaemonSet": lambda o: o["spec"]["template"]["spec"]["containers"][0]["image"],
    "kubernetes:autoscaling/v2:HorizontalPodAutoscaler": _autoscaler,
    "kubernetes:policy/v1:PodDisruptionBudget": lambda o: ", ".join(f"{k} {v}" for k, v in o["spec"].items() if k != "selector"),
    "kubernetes:core/v1:Service": lambda o: ", ".join(f"{p['name']}:{p['port']}" for p in o["spec"]["ports"]),
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": lambda o: "ingress: " + (", ".join(
        f"TCP {p['port']}" for rule in o["spec"]["ingress"] for p in rule.get("ports", [])) or "none") + (
        ", and from its own pods" if any("from" in rule for rule in o["spec"]["ingress"]) else ""),
    "kubernetes:monitoring.coreos.com/v1:ServiceMonitor": lambda o: ", ".join(
        f"scrapes port {e['port']} {e['path']} every {e['interval']}" for e in o["spec"]["endpoints"]),
    "kubernetes:core/v1:Namespace": lambda o: "pod security: " + ", ".join(
        f"{k.rsplit('/', 1)[1]} {v}" for k, v in sorted(o["metadata"]["labels"].items()) if k.startswith("pod-security")),
    "kubernetes:core/v1:Secret": lambda o: ("data: none (modelfleet:hfToken is not set)" if "stringData" not in o else
                                            "data: [secret]" if is_secret(o["stringData"]) else "data: NOT A SECRET"),
}


def summary(resource: Any) -> str:
    try:
        text = SUMMARIES[resource.type](resource.inputs) if resource.type in SUMMARIES else ""
    except (KeyError, TypeError, ValueError, IndexError):  # an input only known after apply
        text = "(some inputs known after apply)"
    flags = [f for f, on in (("protected", resource.protect), (f"ignore changes: {', '.join(resource.ignore_changes)}",
                                                                 bool(resource.ignore_changes))) if on]
    return "  ".join(p for p in (text, f"[{'; '.join(flags)}]" if flags else "") if p)


def display_name(resource: Any) -> str:
    meta = resource.inputs.get("metadata") if resource.type.startswith("kubernetes:") else None
    if isinstance(meta, dict) and "name" in meta:
        return f"{meta['namespace']}/{meta['name']}" if meta.get("namespace") else meta["name"]
    return resource.name


# Siblings are shown in the order `pulumi up` needs them (Kubernetes objects by kind, as rendered).
ORDER = ("pulumi:providers:", "modelfleet:index:ClusterAccess", "modelfleet:index:NodeRole",
         "modelfleet:index:SystemNodeGroup", "modelfleet:index:ClusterPrerequisites", "modelfleet:index:GpuNodeGroup",
         "modelfleet:index:ModelRepository", "modelfleet:index:TritonServer", "modelfleet:index:VllmDeployment",
         "aws:iam/role:", "aws:iam/rolePolicyAttachment:", "aws:iam/rolePolicy:", "aws:eks/cluster:", "aws:eks/addon:",
         "aws:ec2/", "aws:eks/nodeGroup:", "aws:s3/bucket:", "aws:s3/bucketPublicAccessBlock:", "aws:s3/bucketVersioning:",
         "aws:s3/bucketObjectv2:", "aws:eks/podIdentityAssociation:", "kubernetes:helm.sh/", "kubernetes:")
KINDS = ("Namespace", "DaemonSet", "Secret", "ServiceAccount", "AnalysisTemplate", "Deployment", "Rollout",
         "LeaderWorkerSet", "Service", "HTTPRoute", "PodDisruptionBudget", "NetworkPolicy", "ServiceMonitor",
         "HorizontalPodAutoscaler", "PrometheusRule", "ConfigMap")


def _rank(resource: Any, index: int) -> tuple[int, int, str]:
    rank = next((i for i, prefix in enumerate(ORDER) if resource.type.startswith(prefix)), len(ORDER))
    kind = resource.type.rsplit(":", 1)[-1]
    by_kind = KINDS.index(kind) if resource.type.startswith("kubernetes:") and kind in KINDS else len(KINDS)
    # Within a kind, by name: registration order is not stable (objects registered inside an apply run when
    # their inputs resolve), and two previews of one program must print the same text.
    return rank, by_kind, resource.name


def format_tree(resources: list[Any]) -> list[str]:
    children: dict[str, list[tuple[int, Any]]] = defaultdict(list)
    urns = {r.urn for r in resources}
    for index, resource in enumerate(resources):
        children[resource.parent if resource.parent in urns else ""].append((index, resource))
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for _, r in sorted(children[parent], key=lambda item: _rank(item[1], item[0])):
            first, *more = summary(r).splitlines() or [""]
            lines.append(f"{'  ' * depth}+ {short_type(r.type)} {display_name(r)}" + (f"  {first}" if first else ""))
            lines.extend(f"{'  ' * (depth + 2)}{line}" for line in more)
            walk(r.urn, depth + 1)

    walk("", 1)
    return lines


def format_preview(result: Any) -> str:
    """Deterministic: the same program and catalogue print the same text (timings go to stderr)."""
    kinds = Counter("provider" if r.type.startswith("pulumi:providers:") else "stack" if r.type == "pulumi:pulumi:Stack"
                    else "object" if r.custom else "component" for r in result.resources)
    protected = sum(r.protect for r in result.resources)
    head = [f"pulumi up --stack {result.stack} would create {len(result.resources)} resources: {kinds['object']} AWS "
            f"and Kubernetes objects ({protected} protected), {kinds['component']} components, "
            f"{kinds['provider']} provider(s) and the stack",
            "offline preview: the real program under Pulumi's mocks, no AWS account, nothing created; as a first "
            "deploy (no node groups running)",
            f"protected resources are never deleted or replaced by `pulumi up`: see docs/operations/deploying.md, \"Replacing a protected "
            f"node group\"" if protected else "nothing is protected",
            ""]
    outputs = {k: result.outputs.get(k, "(known after a real deploy)") for k in result.exported}
    body = yaml.safe_dump(outputs, sort_keys=True, default_flow_style=False, width=120).rstrip().splitlines()
    return "\n".join(head + format_tree(result.resources) + ["", "outputs:"] + [f"  {line}" for line in body]) + "\n"
