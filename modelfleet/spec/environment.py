"""Environment settings: the ``modelfleet:*`` keys of a Pulumi stack file (stacks/Pulumi.<env>.yaml).

The CLI reads the stack file itself; the Pulumi program reads the same keys through ``pulumi.Config``.
Both hand the key/value pairs to :func:`parse_environment`, so they always agree.

As in models.yaml, types are strict (``singleReplica: "yes"`` is an error), numbers finite and bounded, each
bound documented in its field's description; which keys, families and regions a stack may name is
stack_keys.py's.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from ..errors import Issue, SpecError
from .engine_versions import HAPROXY_IMAGE, TRITON_IMAGE, VLLM_IMAGE
from .issues import issues_from_validation
from .llm_options import IMAGE
from .pipelines import DNS_LABEL
from .rollout import RolloutSpec
from .stack_keys import CONFIG_NAMESPACE, REGION_PATTERN, Settings, config_values, family_issues, region_problem
from .values import FieldProblem, bucket_problem, lists_as_tuples, quantity
from .yaml_source import Document, load_yaml


class EnvFrozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True,
                              strict=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _tuples(cls, data: Any) -> Any:
        return lists_as_tuples(data)


# Settings' bounds include their lower end unless said otherwise (spec/values.py: quantity).
_bounded = functools.partial(quantity, low_inclusive=True)


def _aws_region(region: str) -> str:
    problem = region_problem(region)
    if problem:
        raise FieldProblem((), *problem)
    return region


# A Graviton (arm64) type: a digit, then `g` (m7g, m7gd, c7gn, t4g). The system nodes run the x86_64 AMI.
ARM_INSTANCE = re.compile(r"^[a-z]+[0-9]+g[a-z-]*\.")


def _x86_system_type(name: str) -> str:
    if ARM_INSTANCE.match(name):
        raise FieldProblem((), f"{name} is a Graviton (arm64) type; the system node group is launched with the "
                               "AL2023 x86_64 AMI, which arm64 instances cannot boot",
                           "use an x86_64 type such as m7i.large, m6i.large or m7a.large")
    return name


class ReplicaPolicy(EnvFrozen):
    # dev-style environments run one replica of everything, whatever the availability SLA says.
    single_replica: bool = False
    # Autoscaling ceiling = ceil(desired x this): room for traffic above the declared peak.
    max_scale_factor: _bounded(1.0, 10.0, "autoscaling ceiling as a multiple of the desired replicas, 1 to 10") = 1.5
    # Availability at or above this (percent) needs two replicas in different zones...
    ha_availability: Annotated[float, Field(ge=90.0, lt=100.0, description="percent, at least 90, below 100")] = 99.9
    # ...and at or above this, three.
    ha3_availability: Annotated[float, Field(ge=90.0, lt=100.0, description="percent, at least 90, below 100")] = 99.99
    # 0: workloads whose availability floor is one replica scale to zero when idle (a KEDA ScaledObject on the
    # HPA's queue metric, their pool at minimum 0; the plan states the cold start). None (the default): every
    # workload keeps at least one replica, so the first request never waits for a GPU node.
    minimum: Annotated[int, Field(ge=0, le=0, description="0: scale idle workloads to zero (KEDA); the only value "
                                                           "(leave it out to keep one replica)")] | None = None


class TritonTracingSettings(EnvFrozen):
    """Triton's OpenTelemetry tracing (``--trace-config mode=opentelemetry``): spans of sampled requests
    (HTTP/gRPC receive, queue, compute, send; level TIMESTAMPS) exported over OTLP/HTTP to a collector."""

    # The collector's OTLP/HTTP traces endpoint, as Triton's exporter takes it (scheme optional).
    collector_url: Annotated[str, Field(pattern=r"^(https?://)?[A-Za-z0-9.-]+(:[0-9]{1,5})?(/[^\s,]*)?$",
                                        max_length=2048, description="OTLP/HTTP traces endpoint of the collector, "
                                        "e.g. http://otel-collector.observability:4318/v1/traces")]
    # One request in a thousand: enough spans to see where time goes at production rates, a small fraction
    # of the exporter's work (every traced request costs its spans' serialisation and an HTTP export).
    sampling_rate: Annotated[float, AfterValidator(lambda rate: _one_in_n(rate)), Field(
        gt=0.0, le=1.0, description="fraction of requests traced, above 0, at most 1; Triton samples one request "
                                    "in N, so it must be 1/N (0.001 = one in 1,000)")] = 0.001

    @property
    def one_in(self) -> int:
        """Triton's ``rate``: one request in this many is traced."""
        return round(1 / self.sampling_rate)


def _one_in_n(rate: float) -> float:
    """Triton's sampling is "one in N": a rate that is not 1/N (0.3) would silently become another one."""
    if abs(1 / rate - round(1 / rate)) > 1e-3 * (1 / rate):
        raise FieldProblem((), f"{rate:g} is not one request in a whole number of requests (1/{1 / rate:.4g}): "
                               "Triton samples one request in N",
                           f"use 1/N, e.g. {1 / round(1 / rate):.6g} (one in {round(1 / rate):,})")
    return rate


class TritonSettings(EnvFrozen):
    # pinned: config semantics change between releases; the release whose config schema renders the configs
    image: str = TRITON_IMAGE
    # Fraction of a node's RAM share left after the system reserve that goes to the response cache.
    cache_ram_fraction: _bounded(0.0, 0.9, "fraction of spare node RAM for the response cache, 0 to 0.9") = 0.5
    # Triton's own default; in-flight requests drain.
    exit_timeout_secs: _bounded(1, 600, "seconds Triton drains in-flight requests, 1 to 600", kind=int) = 30
    # Compute is planned at this fraction of measured capacity, leaving headroom for bursts.
    target_utilization: _bounded(0.1, 1.0, "fraction of measured capacity planned for, above 0.1, at most 1",
                                 low_inclusive=False) = 0.7
    # Off by default: tracing needs a collector the cluster may not run, and costs every traced request an
    # export (docs/operations/observability.md "Tracing").
    tracing: TritonTracingSettings | None = None


class VllmSettings(EnvFrozen):
    image: str = VLLM_IMAGE  # the release CI's real vLLM checks every argument list with (engine_versions.py)
    # Pinned because vLLM changed its default between versions (0.9 -> 0.92); never rely on it.
    gpu_memory_utilization: _bounded(0.5, 0.98, "vLLM --gpu-memory-utilization, 0.5 to 0.98") = 0.90
    enable_prefix_caching: bool = True
    # vLLM's own default ceiling.
    max_num_seqs_cap: _bounded(1, 4096, "ceiling on vLLM --max-num-seqs, 1 to 4,096", kind=int) = 256


class ClusterSettings(EnvFrozen):
    # Whether this stack creates the EKS cluster (then its control plane is part of the stack's cost) or
    # joins an existing one (default: most platform teams own the cluster; model stacks add node groups).
    create: bool = False
    # The existing cluster to join, or the name of the one created; default: modelfleet-<stack>.
    name: Annotated[str, Field(pattern=r"^[0-9A-Za-z][A-Za-z0-9_-]{0,99}$")] | None = None
    # Private subnets for node groups (and the created cluster's control plane); empty: the existing
    # cluster's own subnets are looked up.
    subnet_ids: tuple[Annotated[str, Field(pattern=r"^subnet-[0-9a-f]+$")], ...] = ()
    # A created cluster's public API endpoint answers only these CIDRs (your CI runners' and VPN's egress);
    # [] keeps it private (then `pulumi up` runs from inside the VPC). Required with create: true, so that
    # nobody gets an endpoint open to the internet by default (checked by modelfleet.deploy.checks).
    public_access_cidrs: tuple[str, ...] | None = None
    # A created cluster's untainted system nodes (CoreDNS, the autoscaler, Prometheus, the LWS controller).
    system_instance_type: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9]+$"),
                                    AfterValidator(_x86_system_type)] = "m7i.large"


class NodesSettings(EnvFrozen):
    """How GPU nodes are provisioned (modelfleet/deploy/provisioners): EKS managed node groups scaled by the
    cluster autoscaler (the default: nothing to install), or Karpenter NodePools (docs/scheduling.md,
    "Choosing a provisioner")."""

    provisioner: Literal["managed", "karpenter"] = "managed"
    # The Karpenter chart a created cluster installs, and the least a joined cluster must run: 1.6 is the first
    # release that launches into Capacity Blocks (ODCRs from 1.3); the NodePool fields used are karpenter.sh/v1.
    karpenter_version: Annotated[str, Field(pattern=r"^1\.([6-9]|[1-9][0-9])\.[0-9]+$")] = "1.6.0"
    # A node's longest life (NodePool expireAfter): Karpenter's own default of 30 days, so every node picks up
    # AMI and kernel patches within a month; its workloads move under their disruption budgets.
    expire_after_hours: _bounded(1, 8760, "hours a Karpenter node lives before it is replaced, 1 to 8,760",
                                 kind=int) = 720


_CR_ID = r"^cr-[0-9a-z]+$"
_AZ = r"^[a-z]{2}(-[a-z]+)+-[0-9]+[a-z]$"


class CapacityReservationSpec(EnvFrozen):
    """An EC2 On-Demand Capacity Reservation (``id``) or a Capacity Block for ML (``capacityBlockId``): GPUs
    already paid for, used before any other capacity (docs/scheduling.md, "Capacity reservations")."""

    id: Annotated[str, Field(pattern=_CR_ID)] | None = None
    capacity_block_id: Annotated[str, Field(pattern=_CR_ID)] | None = None
    instance_type: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]*\.[a-z0-9]+$")]
    zone: Annotated[str, Field(pattern=_AZ, description="the reservation's availability zone, e.g. us-east-1a")]
    count: _bounded(1, 10_000, "instances reserved, 1 to 10,000", kind=int)
    # When it ends (YYYY-MM-DD, UTC): a Capacity Block always ends (its instances are reclaimed); an ODCR may
    # be open-ended (None).
    ends: Annotated[str, Field(pattern=r"^20[0-9]{2}-[01][0-9]-[0-3][0-9]$")] | None = None
    # What it costs per instance-hour, used or not: None prices it at the type's on-demand rate (an ODCR's
    # billing); a Capacity Block's price is its own (write it here, from the purchase).
    usd_per_hour: _bounded(0, 10_000, "USD per reserved instance-hour, 0 to 10,000", optional=True) = None

    @model_validator(mode="after")
    def _one_id(self) -> "CapacityReservationSpec":
        if (self.id is None) == (self.capacity_block_id is None):
            raise FieldProblem(("id",), "a reservation names exactly one of id (an ODCR) or capacityBlockId",
                               "write id: cr-... for an On-Demand Capacity Reservation, capacityBlockId: cr-... for "
                               "a Capacity Block")
        if self.capacity_block_id is not None and self.ends is None:
            raise FieldProblem(("ends",), "a Capacity Block ends: the plan warns before it does",
                               "write ends: YYYY-MM-DD, the block's end date")
        return self

    @property
    def reservation_id(self) -> str:
        return self.id or self.capacity_block_id or ""

    @property
    def kind(self) -> str:
        return "capacity-block" if self.capacity_block_id else "odcr"


class DaemonSetAllowance(EnvFrozen):
    """What every GPU node keeps for DaemonSets beside the serving pods, per node.

    The default is what an EKS GPU node runs, by the requests of their charts and add-ons: aws-node with its
    network-policy agent (25m + 25m), kube-proxy (100m), the Pod Identity agent, the EBS CSI node plugin (3 x
    10m and 40 MiB), the NVIDIA device plugin (50m, 64 MiB, ours: render/k8s/cluster.py), dcgm-exporter, a
    Prometheus node-exporter, and a log shipper and a metrics agent (CloudWatch's are 200m / 200 MiB and
    more): about 0.75 CPU and 1 GiB on any node. What grows with the node: per-node agents sized by cores (a
    log shipper's and the exporters' load follow the pods a node runs) take 0.5% of its vCPUs, as the
    kubelet's own reserve does for its higher cores; per-GPU exporters (dcgm-exporter, the EFA plugin on p4d/p5)
    take 256 MiB per GPU. So a g5.xlarge keeps 0.77 CPU and 1.25 GiB, a p5.48xlarge 1.71 CPU and 3 GiB.
    Their images and logs take 10 GiB of the pods' disk; 12 pods covers the list above with room. A cluster
    that runs more on every node (the GPU Operator, a security agent) raises it: the fit check then leaves it
    free. A value set here is taken as is, on every node."""

    cpu: _bounded(0, 64, "CPU cores per node, 0 to 64") | None = None  # None: BASE_CPU + CPU_PER_VCPU x vCPUs
    memory_gib: _bounded(0, 512, "GiB per node, 0 to 512") | None = None  # None: BASE + MEMORY_PER_GPU_GIB x GPUs
    ephemeral_storage_gib: _bounded(0, 1024, "GiB of the pods' disk per node (DaemonSet images and logs), 0 to 1,024") = 10.0
    pods: _bounded(0, 100, "pods per node, 0 to 100", kind=int) = 12

    def for_node(self, vcpu: int, gpus: int) -> DaemonSetAllowance:
        """This allowance on a node of ``vcpu`` vCPUs and ``gpus`` GPUs: the defaults scaled, set values as is."""
        cpu = self.cpu if self.cpu is not None else round(ALLOWANCE_BASE_CPU + ALLOWANCE_CPU_PER_VCPU * vcpu, 3)
        memory = self.memory_gib if self.memory_gib is not None else \
            round(ALLOWANCE_BASE_MEMORY_GIB + ALLOWANCE_MEMORY_PER_GPU_GIB * gpus, 2)
        return self.model_copy(update={"cpu": cpu, "memory_gib": memory})


# What NVIDIA's DCGM exporter requests on every GPU node: render/k8s/dcgm_exporter.py writes these into its
# DaemonSet (where the stack creates the cluster), and the allowance below counts them, so the fit check leaves
# exactly this free for it. 100m as NVIDIA's example manifest requests; 256 MiB, twice its 128 MiB, because its
# embedded host engine grows with the GPUs it watches (its example's limit).
DCGM_EXPORTER_CPU = 0.1
DCGM_EXPORTER_MEMORY_GIB = 0.25
# The default allowance's parts (DaemonSetAllowance's docstring says what they cover): the DCGM exporter's
# request and everything else's.
ALLOWANCE_BASE_CPU = round(0.65 + DCGM_EXPORTER_CPU, 3)  # 0.75
ALLOWANCE_CPU_PER_VCPU = 0.005
ALLOWANCE_BASE_MEMORY_GIB = 1.0
ALLOWANCE_MEMORY_PER_GPU_GIB = DCGM_EXPORTER_MEMORY_GIB  # per-GPU exporters: a GPU node has at least one GPU


def _bucket_name(bucket: str) -> str:
    if problem := bucket_problem(bucket):
        raise FieldProblem((), problem, "name a bucket as S3 allows: 3 to 63 lowercase letters, digits, '.' and '-'")
    return bucket


class DeploySettings(EnvFrozen):
    """How ``pulumi up`` creates things (no effect on the plan's decisions)."""

    # AL2023 NVIDIA ships the driver but no device plugin (we install it); Bottlerocket NVIDIA ships both.
    ami_type: Literal["AL2023_x86_64_NVIDIA", "BOTTLEROCKET_x86_64_NVIDIA"] = "AL2023_x86_64_NVIDIA"
    # Holds each Triton server's config.pbtxt files. S3 names are global: set your own; the default,
    # modelfleet-<stack>-model-repository, is for trying things out.
    # Its name reaches the pods' IAM grants (render/iam.py): S3's naming rules are checked, not just the characters.
    model_repository_bucket: Annotated[str, AfterValidator(_bucket_name),
                                       Field(json_schema_extra={"pattern": r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$"})] | None = None
    # Root volume of GPU nodes, at least: a group whose pods write more (model caches) gets what they need.
    node_disk_gib: _bounded(50, 16_384, "GPU nodes' root volume in GiB, 50 to 16,384 (EBS gp3's largest)",
                            kind=int) = 200
    aws_cli_image: str = "public.ecr.aws/aws-cli/aws-cli:2.27.0"  # copies the model repository from S3
    # counts each Triton pod's callers where the stack declares them (render/k8s/callers.py): the official image of
    # the HAProxy release CI runs the generated configuration on; a mirror of it in a private registry goes here
    caller_proxy_image: Annotated[str, Field(pattern=IMAGE, max_length=512)] = HAPROXY_IMAGE
    # Per-node room the fit check keeps free for DaemonSets (modelfleet/plan/capacity/fit.py).
    daemonset_allowance: DaemonSetAllowance = DaemonSetAllowance()
    # AL2023 NVIDIA nodes need NVIDIA's device plugin; false when the cluster already runs one (the GPU Operator
    # or NVIDIA's own chart), so that no node gets two plugins registering the same GPUs.
    install_device_plugin: bool = True
    # A pinned Hugging Face checkpoint is copied once per revision into the bucket above (a Job) and streamed from
    # there, so a recreated pod or LeaderWorkerSet group never downloads it from the Hub again
    # (modelfleet/plan/llm/weights.py); false: every pod downloads it from the Hub into its own emptyDir.
    stage_hub_weights: bool = True
    # The Triton servers this stack deployed while servers were named after their first model (triton-<anchor>,
    # before they were named by pool or instance type). A server whose former name is listed keeps it as its
    # physical name (Kubernetes objects, selector labels, its S3 config prefix), so `pulumi up` replaces
    # nothing, while the plan, preview, dashboards and the modelfleet.io/server label carry the new name. Empty
    # by default: a new stack, and any server not listed (a new one), gets the new names everywhere
    # (docs/concepts/decisions.md, "Server names").
    former_server_names: tuple[Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")], ...] = ()


class ObservabilitySettings(EnvFrozen):
    """Where the generated alerts point people (docs/operations/observability.md)."""

    # The published docs site's base URL (its runbooks page is <url>/runbooks/); None: alerts carry the
    # runbook's path in the repository (docs/runbooks/alerts.md#<alert>), which a reader of the rule can still follow.
    docs_url: Annotated[str, Field(pattern=r"^https?://[^\s#?]+$", max_length=2048)] | None = None


class CostSettings(EnvFrozen):
    # Spot price = on-demand x this ratio wherever the price table has no dated spot price for a type. None
    # (the default): no assumption, so such a type's spot cost is unknown, never guessed; the shipped table has
    # dated spot figures for every type in us-east-1 (data/instances.yaml says where they come from), and
    # `modelfleet prices refresh` writes measured ones. Set, it is printed as ASSUMED by every preview.
    spot_price_ratio: _bounded(0.0, 1.0, "spot price as a fraction of on-demand, above 0, at most 1",
                               low_inclusive=False, optional=True) = None


class PlacementSettings(EnvFrozen):
    # The PR cost comment names `plan --repack` when re-solving the placement the lock keeps would save more
    # than this share of the stack's monthly cost: 10% is worth a pull request that rolls servers; less is not.
    repack_saving_percent: _bounded(0.0, 100.0, "percent of the stack's monthly cost, 0 to 100",
                                    low_inclusive=True) = 10.0


class BudgetSettings(EnvFrozen):
    monthly_usd: _bounded(0, 1e9, "USD per month, above 0, at most 1,000,000,000", low_inclusive=False)
    # fail: the compile fails when over budget; warn: a warning is printed and the plan goes ahead.
    on_exceed: Literal["fail", "warn"] = "fail"
    # desired: the cost at the declared peak load; max: what the autoscaler may reach (maxScaleFactor).
    basis: Literal["desired", "max"] = "desired"


class ForbidRule(EnvFrozen):
    """Instance families this environment must not run on (optionally only on one capacity type)."""

    families: Annotated[tuple[str, ...], Field(min_length=1)]
    capacity_type: Literal["on-demand", "spot"] | None = None  # None: either
    reason: str | None = None  # printed with the violation, e.g. "H100s are for production"


class PolicySettings(EnvFrozen):
    """A platform team's guardrails; each violation fails the compile naming the model, the rule and the fix.

    Unlike ``instanceFamilies`` (what the compiler may choose from), a policy never changes a choice: it
    rejects a plan, so a widened ``instanceFamilies`` or an ``overrides.instance_type`` cannot slip past.
    """

    allowed_families: tuple[str, ...] | None = None  # None: any family
    forbid: tuple[ForbidRule, ...] = ()
    # At max replicas, all nodes of a replica.
    max_gpus_per_model: _bounded(1, 100_000, "GPUs one model may use at max replicas, 1 to 100,000",
                                 kind=int, optional=True) = None
    # At desired replicas.
    max_monthly_usd_per_model: _bounded(0, 1e9, "USD per month one model may cost, above 0, at most "
                                        "1,000,000,000", low_inclusive=False, optional=True) = None


class GatewaySettings(EnvFrozen):
    """A Gateway API Gateway the stack's clients reach the models through: a canary's traffic split is then
    exact (HTTPRoute weights, set by Argo Rollouts' Gateway API plugin), not the replica ratio."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")]
    namespace: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")] | None = None  # None: the stack's


# Callers counted one by one at each Triton server (EnvironmentSpec.callers); the bound keeps the series few.
MAX_CALLERS = 32
OTHER_CALLER = "other"  # what every request naming no declared caller (or none) counts as
def _caller_name(name: str) -> str:
    """A lowercase DNS label: what the client sends, HAProxy matches (lowercased) and Prometheus labels."""
    if not re.fullmatch(DNS_LABEL, name):
        raise FieldProblem((), f"caller {name!r} is not a lowercase DNS label",
                           "lowercase letters, digits and '-', at most 63 characters, starting and ending with a "
                           "letter or digit, such as checkout-service")
    return name


CallerName = Annotated[str, AfterValidator(_caller_name), Field(json_schema_extra={"pattern": DNS_LABEL})]


class EnvironmentSpec(EnvFrozen):
    """One environment (= one Pulumi stack)."""

    name: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,30}[a-z0-9])?$")]
    region: Annotated[str, AfterValidator(_aws_region), Field(json_schema_extra={"pattern": REGION_PATTERN})]
    capacity_type: Literal["on-demand", "spot"] = "on-demand"
    instance_families: Annotated[tuple[str, ...], Field(min_length=1)] = ("g5", "g6", "g6e", "p4d", "p5")
    availability_zones: _bounded(1, 6, "zones node groups span, 1 to 6", kind=int) = 3
    kubernetes_version: Annotated[str, Field(pattern=r"^1\.\d{2}$")] = "1.33"
    namespace: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")] = "modelfleet"
    replicas: ReplicaPolicy = ReplicaPolicy()
    triton: TritonSettings = TritonSettings()
    vllm: VllmSettings = VllmSettings()
    cluster: ClusterSettings = ClusterSettings()
    deploy: DeploySettings = DeploySettings()
    # Pulumi `protect` on node groups, the model-repository bucket and a created cluster: a `pulumi
    # destroy` or a replacing change then stops instead of deleting them. Off by default (dev stacks come
    # and go); prod sets it.
    protect: bool = False
    observability: ObservabilitySettings = ObservabilitySettings()
    cost: CostSettings = CostSettings()
    placement: PlacementSettings = PlacementSettings()  # the placement lock's re-pack hint (docs/operations/placement-lock.md)
    budget: BudgetSettings | None = None  # None: no budget for this environment
    policies: PolicySettings = PolicySettings()
    # Every model must pin what it serves (a Triton version, an LLM revision): off by default so that a first
    # try needs no pins; unpinned models then get a warning. Prod sets it.
    require_pins: bool = False
    # How workloads ship a change unless their model says otherwise (spec/rollout.py); None: rolling.
    rollout: RolloutSpec | None = None
    # The Gateway clients come through (HTTPRoute weights split a canary exactly); None: the replica ratio.
    gateway: GatewaySettings | None = None
    nodes: NodesSettings = NodesSettings()
    # Reserved GPUs (ODCRs, Capacity Blocks): used first, priced as already paid (plan/capacity/reservations.py).
    capacity_reservations: tuple[CapacityReservationSpec, ...] = ()
    # Who calls this stack's Triton servers (the x-modelfleet-caller header of the generated client): each server
    # counts its requests per caller, any other as "other", through a proxy beside it (render/k8s/callers.py).
    callers: Annotated[tuple[CallerName, ...], Field(max_length=MAX_CALLERS, description=(
        "the services that call this stack's Triton servers, as their requests name themselves (the generated "
        f"client's caller=): each server counts requests per caller, any other as {OTHER_CALLER!r}; at most "
        f"{MAX_CALLERS}, lowercase DNS labels"))] = ()

    @model_validator(mode="after")
    def _callers_once(self) -> "EnvironmentSpec":
        seen: set[str] = set()
        for index, caller in enumerate(self.callers):
            if caller == OTHER_CALLER:
                raise FieldProblem(("callers", index), f"{OTHER_CALLER!r} counts the requests of undeclared callers",
                                   "name the service that sends them instead")
            if caller in seen:
                raise FieldProblem(("callers", index), f"caller {caller!r} is declared twice", "declare it once")
            seen.add(caller)
        return self

    @model_validator(mode="after")
    def _allowance_holds_the_dcgm_exporter(self) -> "EnvironmentSpec":
        """A created cluster runs our DCGM exporter on every GPU node: an allowance set below its requests would
        let the fit check hand its share to the serving pods, and the exporter would stay Pending."""
        allowance = self.deploy.daemonset_allowance
        for field, key, needed, unit in (("cpu", "cpu", DCGM_EXPORTER_CPU, "CPU"),
                                         ("memory_gib", "memoryGib", DCGM_EXPORTER_MEMORY_GIB, "GiB")):
            value = getattr(allowance, field)
            if self.cluster.create and value is not None and value < needed:
                raise FieldProblem(("deploy", "daemonsetAllowance", key),
                                   f"{value:g} {unit} per node is less than the DCGM exporter this stack installs on "
                                   f"every GPU node requests ({needed:g} {unit})",
                                   f"set it to at least {needed:g} plus what the cluster's other DaemonSets request, "
                                   "or leave it out for the default")
        return self

    @model_validator(mode="after")
    def _reservations_in_region(self) -> "EnvironmentSpec":
        for index, reservation in enumerate(self.capacity_reservations):
            if not reservation.zone.startswith(f"{self.region}") or len(reservation.zone) != len(self.region) + 1:
                raise FieldProblem(("capacityReservations", index, "zone"),
                                   f"zone {reservation.zone} is not in the stack's region {self.region}",
                                   f"write a zone of {self.region}, e.g. {self.region}a")
        return self


def deployment_issues(env: EnvironmentSpec, file: str) -> list[Issue]:
    """What ``pulumi up`` needs beyond what compiling and costing need (checked before anything is created)."""
    issues = []
    if env.cluster.create and len(set(env.cluster.subnet_ids)) < 2:
        issues.append(Issue(file, 0, 0, f"config.{CONFIG_NAMESPACE}:cluster.subnetIds",
                            "a cluster this stack creates needs its subnets",
                            "list at least two private subnets, in different availability zones: EKS needs two"))
    return issues


def stack_path(stacks_dir: str, stack: str) -> str:
    return os.path.join(stacks_dir, f"Pulumi.{stack}.yaml")


def list_stacks(stacks_dir: str) -> tuple[str, ...]:
    """Stack names with a file in ``stacks_dir`` (Pulumi.<name>.yaml), sorted."""
    try:
        names = os.listdir(stacks_dir)
    except OSError:
        return ()
    return tuple(sorted(n[len("Pulumi."):-len(".yaml")] for n in names
                        if n.startswith("Pulumi.") and n.endswith(".yaml")))


SETTINGS = Settings.of(EnvironmentSpec.model_fields)  # what a stack file may set (stack_keys.py)


def parse_environment(stack: str, config: dict[str, Any], doc: Document | None = None, *,
                      families: Iterable[str]) -> EnvironmentSpec:
    """Validate the ``modelfleet:*`` keys (plus ``aws:region``) of one stack's config; every problem at once.

    ``families``: the instance families a stack may name, those of the price table in use (the plan stage's
    catalogue: the caller reads it, so that this stage imports nothing of the later ones). Without
    ``doc``, ``config`` is what Pulumi hands the program: top-level scalars as strings (stack_keys.config_values)."""
    source = doc or Document(f"stack {stack}", None)
    values, issues = config_values(stack, config, source, SETTINGS, typed=doc is not None)
    issues += family_issues(values, families, source)
    try:
        env = EnvironmentSpec.model_validate(values)
    except ValidationError as exc:
        raise SpecError(issues + issues_from_validation(source, exc, remap=_to_config_path,
                                                        root=EnvironmentSpec)) from None
    if issues:
        raise SpecError(issues)
    return env


def _to_config_path(path: tuple) -> tuple:
    if not path:
        return path
    head = "aws:region" if path[0] == "region" else f"{CONFIG_NAMESPACE}:{path[0]}"
    return ("config", head) + tuple(path[1:])


def load_environment(stacks_dir: str, stack: str, families: Iterable[str]) -> EnvironmentSpec:
    """Read stacks/Pulumi.<stack>.yaml the way ``pulumi up --stack <stack>`` will."""
    path = stack_path(stacks_dir, stack)
    if not os.path.exists(path):
        known = ", ".join(list_stacks(stacks_dir)) or "none"
        raise SpecError([Issue(path, 0, 0, "", f"no stack named {stack!r}", f"use one of: {known}")])
    doc = load_yaml(path)
    config = doc.data.get("config") if isinstance(doc.data, dict) else None
    if doc.issues or not isinstance(config, dict):
        raise SpecError(doc.issues or [doc.issue((), "a stack file needs a `config:` mapping", "add `config:`")])
    return parse_environment(stack, config, doc, families=families)
