"""What ``pulumi up`` needs beyond a valid plan, checked before anything is created (``__main__.py``)."""

from __future__ import annotations

import ipaddress

from ..errors import Issue
from ..spec.environment import CONFIG_NAMESPACE, EnvironmentSpec
from .types import DeployPlan

CIDRS_PATH = f"config.{CONFIG_NAMESPACE}:cluster.publicAccessCidrs"
TOKEN_COMMAND = "pulumi config set --secret modelfleet:hfToken hf_..."


def _cidr_issues(cidrs: tuple[str, ...], file: str) -> list[Issue]:
    issues = []
    for index, cidr in enumerate(cidrs):
        try:
            network = ipaddress.ip_network(cidr, strict=True)
        except ValueError as exc:
            issues.append(Issue(file, 0, 0, f"{CIDRS_PATH}[{index}]", f"{cidr!r} is not a CIDR ({exc})",
                                "write an address block such as 203.0.113.0/24"))
            continue
        if network.prefixlen == 0:
            issues.append(Issue(file, 0, 0, f"{CIDRS_PATH}[{index}]", "the API endpoint would be open to the internet",
                                "list your CI runners' and VPN's egress CIDRs, or [] for a private endpoint"))
    return issues


def cluster_issues(env: EnvironmentSpec, file: str) -> list[Issue]:
    """A created cluster states who may reach its API: never open to the internet by default."""
    if not env.cluster.create:
        return []
    if env.cluster.public_access_cidrs is None:
        return [Issue(file, 0, 0, CIDRS_PATH, "a cluster this stack creates needs its API endpoint's access stated",
                      "list the CIDRs that run `pulumi up` and kubectl (CI runners, VPN), or [] for a private "
                      "endpoint (then run `pulumi up` from inside the VPC)")]
    return _cidr_issues(env.cluster.public_access_cidrs, file)


def credential_issues(fleet: DeployPlan, token_set: bool, dry_run: bool, file: str) -> tuple[list[Issue], list[str]]:
    """(errors, warnings) about the Hugging Face token: models pulled from the hub (gated meta-llama ones among
    them) crash-loop without it, so a real deploy stops; a preview only warns, so it runs offline."""
    hub = sorted(m.name for m in fleet.vllm_models if m.hf_secret is not None)
    if token_set or not hub:
        return [], []
    message = f"modelfleet:hfToken is not set: {', '.join(hub)} download from the Hugging Face hub"
    if dry_run:
        return [], [f"{message}; `pulumi up` will stop until it is set ({TOKEN_COMMAND})"]
    return [Issue(file, 0, 0, f"config.{CONFIG_NAMESPACE}:hfToken", message, TOKEN_COMMAND)], []
