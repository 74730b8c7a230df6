"""Applying the compiler's Kubernetes objects as they are.

``KubernetesObject`` registers one object with the kubernetes provider under its own type token
(``kubernetes:apps/v1:Deployment``...), with the object itself as inputs: what ``modelfleet render`` wrote
is exactly what is applied, and under mocks every object is a visible child.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi

from modelfleet.deploy.types import AppliedObject, object_key

from .registry import Registry


def type_token(obj: dict[str, Any]) -> str:
    api = obj["apiVersion"]
    group_version = api if "/" in api else f"core/{api}"
    return f"kubernetes:{group_version}:{obj['kind']}"


class KubernetesObject(pulumi.CustomResource):
    def __init__(self, name: str, obj: dict[str, Any], opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(type_token(obj), name, dict(obj), opts)


def apply_objects(objects: Sequence[AppliedObject], parent: pulumi.Resource, provider: pulumi.ProviderResource,
                  registry: Registry) -> list[KubernetesObject]:
    """Each object after what it waits for; each registered under its own key for those that follow."""
    created = []
    for obj in objects:
        opts = pulumi.ResourceOptions(parent=parent, provider=provider, ignore_changes=list(obj.ignore_changes),
                                      depends_on=registry.resolve(obj.waits_for),
                                      aliases=[pulumi.Alias(name=a) for a in obj.aliases])
        created.append(KubernetesObject(obj.name, obj.manifest, opts))
        registry.add(object_key(obj.name), created[-1])
    return created
