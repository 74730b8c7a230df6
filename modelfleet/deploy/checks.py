"""What ``pulumi up`` needs beyond a valid plan, checked before anything is created (``__main__.py``)."""

from __future__ import annotations

import ipaddress

from ..errors import Issue
from ..plan.types import FleetPlan, VllmModelPlan
from ..spec.environment import CONFIG_NAMESPACE, EnvironmentSpec
from .types import DeployPlan, LiveCluster

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
    them) crash-loop without it, so a real deploy stops; a preview only warns, so it runs offline. A repository
    anyone may download (hub.gated: false, or a preset's ungated one) needs none: its pods read the Secret if
    it is set, and do without it."""
    hub = sorted(m.name for m in fleet.vllm_models if m.hf_secret is not None and m.hf_token_required)
    if token_set or not hub:
        return [], []
    message = f"modelfleet:hfToken is not set: {', '.join(hub)} download from the Hugging Face hub"
    if dry_run:
        return [], [f"{message}; `pulumi up` will stop until it is set ({TOKEN_COMMAND})"]
    return [Issue(file, 0, 0, f"config.{CONFIG_NAMESPACE}:hfToken", message, TOKEN_COMMAND)], []


# Fields the rendered objects use, and the Kubernetes minor version from which the API server keeps them
# (an older one drops an unknown field without a word): LeaderWorkerSet groups keep to one zone through
# podAffinity.matchLabelKeys (MatchLabelKeysInPodAffinity, beta and on by default from 1.31); rollouts keep
# the zone spread of the new pods apart from the old ones' with topologySpreadConstraints.matchLabelKeys
# (MatchLabelKeysInPodTopologySpread, beta from 1.27).
FEATURES = (("podAffinity.matchLabelKeys keeps each multi-node replica in one zone", 31, "multi-node"),
            ("topologySpreadConstraints.matchLabelKeys spreads a rollout's new pods over zones", 27, "spread"))


def _minor(version: str) -> int:
    return int(version.split(".")[1])


def _uses(plan: FleetPlan, what: str) -> list[str]:
    workloads = [*plan.triton_servers, *(m for m in plan.models if isinstance(m, VllmModelPlan))]
    if what == "multi-node":
        return sorted(w.name for w in workloads if getattr(w, "nodes_per_replica", 1) > 1)
    return sorted(w.name for w in workloads if w.spread_zones)


def version_issues(env: EnvironmentSpec, plan: FleetPlan, live: LiveCluster, file: str) -> tuple[list[Issue], list[str]]:
    """(errors, warnings) from the cluster's real version: a feature the workloads need and the cluster lacks
    is an error (its pods would silently lose the constraint); a version other than the stack's is a warning
    (the stack's modelfleet:kubernetesVersion should say what runs)."""
    if live.kubernetes_version is None:
        return [], []
    issues, warnings = [], []
    for feature, minor, what in FEATURES:
        users = _uses(plan, what)
        if users and _minor(live.kubernetes_version) < minor:
            issues.append(Issue(file, 0, 0, f"config.{CONFIG_NAMESPACE}:cluster.name",
                                f"cluster {env.cluster.name or env.name} runs Kubernetes {live.kubernetes_version}; "
                                f"{feature} from 1.{minor} on, and {', '.join(users)} need it",
                                f"upgrade the cluster to 1.{minor} or later"))
    if live.kubernetes_version != env.kubernetes_version:
        warnings.append(f"the cluster runs Kubernetes {live.kubernetes_version}, the stack says "
                        f"{env.kubernetes_version}: set modelfleet:kubernetesVersion: \"{live.kubernetes_version}\"")
    return issues, warnings
