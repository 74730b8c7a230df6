"""One vLLM model: its Hugging Face token as a Kubernetes Secret (from a Pulumi secret) and its manifests."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from modelfleet.k8s import hf_secret_name
from modelfleet.plan import FleetPlan, VllmModelPlan

from .kubernetes import apply_objects


class VllmDeployment(pulumi.ComponentResource):
    def __init__(self, model: VllmModelPlan, plan: FleetPlan, manifests: list[dict[str, Any]],
                 hf_token: pulumi.Output[str] | None, provider: pulumi.ProviderResource,
                 opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:VllmDeployment", model.name, None, opts)
        token = pulumi.Output.secret(hf_token if hf_token is not None else "")
        secret = k8s.core.v1.Secret(
            f"{model.name}-hf-token",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=hf_secret_name(model), namespace=plan.namespace),
            type="Opaque", string_data={"token": token},
            opts=pulumi.ResourceOptions(parent=self, provider=provider, additional_secret_outputs=["stringData", "data"]))
        apply_objects(manifests, self, provider, depends_on=[secret])
        self.endpoint = f"http://{model.name}.{plan.namespace}.svc.cluster.local:8000/v1"
        self.register_outputs({"endpoint": self.endpoint})
