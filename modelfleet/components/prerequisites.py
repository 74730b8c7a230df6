"""A created cluster's prerequisites, each a pinned Helm release (``HelmReleaseDeploy``)."""

from __future__ import annotations

from collections.abc import Sequence

import pulumi
import pulumi_kubernetes as k8s

from modelfleet.deploy.types import HelmReleaseDeploy, release_key

from .identity import pod_role
from .registry import Registry


class ClusterPrerequisites(pulumi.ComponentResource):
    def __init__(self, name: str, releases: Sequence[HelmReleaseDeploy], cluster_name: pulumi.Input[str],
                 provider: pulumi.ProviderResource, registry: Registry, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:ClusterPrerequisites", name, None, opts)
        for spec in releases:
            identity = [pod_role(spec.identity, cluster_name, self)] if spec.identity else []
            repository = k8s.helm.v3.RepositoryOptsArgs(repo=spec.repository) if spec.repository else None
            release = k8s.helm.v3.Release(
                spec.name, name=spec.name, chart=spec.chart, version=spec.version, repository_opts=repository,
                namespace=spec.namespace, create_namespace=True, values=spec.values, timeout=spec.timeout_s,
                opts=pulumi.ResourceOptions(parent=self, provider=provider,
                                            depends_on=[*registry.resolve(spec.waits_for), *identity]))
            registry.add(release_key(spec.name), release)
        self.register_outputs({})
