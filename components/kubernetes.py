"""Applying the compiler's Kubernetes objects as they are.

``KubernetesObject`` registers one object with the kubernetes provider under its own type token
(``kubernetes:apps/v1:Deployment``...), with the object itself as inputs: what ``modelfleet render`` wrote
is exactly what is applied, and under mocks every object is a visible child.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi


def type_token(obj: dict[str, Any]) -> str:
    api = obj["apiVersion"]
    group_version = api if "/" in api else f"core/{api}"
    return f"kubernetes:{group_version}:{obj['kind']}"


def logical_name(obj: dict[str, Any]) -> str:
    """Stable: kind and name (and namespace), never a position in a list."""
    meta = obj["metadata"]
    return "-".join(p for p in (obj["kind"].lower(), meta.get("namespace", ""), meta["name"]) if p)


def autoscaled(objects: Sequence[dict[str, Any]]) -> set[tuple[str, str]]:
    """(kind, name) of every object an HPA in ``objects`` scales."""
    return {(o["spec"]["scaleTargetRef"]["kind"], o["spec"]["scaleTargetRef"]["name"])
            for o in objects if o["kind"] == "HorizontalPodAutoscaler"}


class KubernetesObject(pulumi.CustomResource):
    def __init__(self, name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token(obj), name, dict(obj), opts)


def apply_objects(objects: Sequence[dict[str, Any]], parent: pulumi.Resource, provider: pulumi.ProviderResource,
                  depends_on: Sequence[pulumi.Resource] = ()) -> list[KubernetesObject]:
    """Objects in order, each after the one before it (a Deployment after its account, its Service after it
    is available). The replicas of an autoscaled workload are set on creation and then left to its HPA."""
    created: list[KubernetesObject] = []
    scaled = autoscaled(objects)
    for obj in objects:
        ignore = ["spec.replicas"] if (obj["kind"], obj["metadata"]["name"]) in scaled else []
        opts = pulumi.ResourceOptions(parent=parent, provider=provider, ignore_changes=ignore,
                                      depends_on=[*depends_on, *created[-1:]])
        created.append(KubernetesObject(logical_name(obj), obj, opts))
    return created
