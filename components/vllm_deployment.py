"""One vLLM model: its credentials (the Hugging Face token from a Pulumi secret, or a role reading its S3
artifact) and its manifests."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from modelfleet.iam import vllm_read_policy
from modelfleet.k8s import hf_secret_metadata
from modelfleet.plan import FleetPlan, VllmModelPlan

from .identity import pod_role
from .kubernetes import apply_objects


class VllmDeployment(pulumi.ComponentResource):
    def __init__(self, plan: FleetPlan, model: VllmModelPlan, manifests: Sequence[dict[str, Any]],
                 hf_token: pulumi.Input[str] | None, cluster_name: pulumi.Input[str], provider: pulumi.ProviderResource,
                 after: Sequence[pulumi.Resource] = (), opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__("modelfleet:index:VllmDeployment", model.name, None, opts)
        policy = vllm_read_policy(model)
        if policy is not None:
            credentials: pulumi.Resource = pod_role(model.name, policy, cluster_name, plan.namespace, self)
        else:
            meta = hf_secret_metadata(plan, model)
            credentials = k8s.core.v1.Secret(
                meta["name"], metadata=meta, type="Opaque",
                string_data={"token": pulumi.Output.secret(hf_token if hf_token is not None else "")},
                opts=pulumi.ResourceOptions(parent=self, provider=provider,
                                            additional_secret_outputs=["stringData", "data"]))
        apply_objects(manifests, self, provider, depends_on=[*after, credentials])
        self.register_outputs({})
