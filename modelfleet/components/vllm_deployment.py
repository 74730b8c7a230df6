"""One vLLM model: its credentials (the Hugging Face token from a Pulumi secret, a role reading the S3 prefix
it streams, a staging Job's role writing it) and its manifests."""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s

from modelfleet.deploy.types import SecretDeploy, VllmDeploy, credentials_key

from .identity import pod_role
from .kubernetes import apply_objects
from .registry import Registry


def token_secret(spec: SecretDeploy, token: pulumi.Output[str] | None, parent: pulumi.Resource,
                 provider: pulumi.ProviderResource, registry: Registry) -> k8s.core.v1.Secret:
    """Without a token (a preview only: a real deploy stops first) the Secret is shown with no data."""
    return k8s.core.v1.Secret(
        spec.name, metadata=spec.metadata, type="Opaque",
        string_data=None if token is None else {spec.data_key: pulumi.Output.secret(token)},
        opts=pulumi.ResourceOptions(parent=parent, provider=provider, depends_on=registry.resolve(spec.waits_for),
                                    additional_secret_outputs=["stringData", "data"],
                                    aliases=[pulumi.Alias(name=alias) for alias in spec.aliases]))


class VllmDeployment(pulumi.ComponentResource):
    def __init__(self, spec: VllmDeploy, hf_token: pulumi.Output[str] | None, cluster_name: pulumi.Input[str],
                 provider: pulumi.ProviderResource, registry: Registry, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:VllmDeployment", spec.name, None, opts)
        for identity in (spec.identity, spec.stage_identity):
            if identity is not None:
                registry.add(credentials_key(spec.name), pod_role(identity, cluster_name, self))
        if spec.hf_secret is not None:
            registry.add(credentials_key(spec.name), token_secret(spec.hf_secret, hf_token, self, provider, registry))
        apply_objects(spec.manifests, self, provider, registry)
        self.register_outputs({})
