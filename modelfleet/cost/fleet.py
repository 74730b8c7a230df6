"""What a FleetPlan costs per month: per node group, per model and per environment, at min/desired/max.

Pure: a FleetPlan, the dated InstanceCatalogue, the stack's cost settings and the LLM loads in, a
``FleetCost`` out. The rules, printed by every preview so a reviewer can redo the arithmetic:

    node group   = nodes x (USD per node-hour x 730 h + its EBS gp3 volume's USD per month)
                   (730 = 8,760 h / 12, AWS's own convention; the volume as the launch template provisions it:
                   GiB, and IOPS and MiB/s above gp3's included 3,000 and 125, at the table's ebs_gp3 prices;
                   EBS is the same on spot. Bottlerocket's own small OS volume from its AMI is not counted)
    workload     = its node group's cost x its GPUs / all GPUs the group's workloads hold
                   (GPUs left idle by whole nodes or zone spread are paid by the group's workloads pro rata;
                   a KIND_CPU server holds whole nodes of its CPU group, one pod per node)
    Triton model = its server's cost x its gpu_share / the sum of gpu_share on that server
                   (gpu_share = the larger of its GPU-memory and compute fractions; the plan records it to
                   4 decimals, so models under 0.005% of a GPU show 0: when every share on a server is 0, the
                   server is split by the models' GPU memory, and equally when that is 0 too); on a KIND_CPU
                   server, x the vCPUs its instances hold / all its instances' vCPUs. A CPU model's row also
                   shows what the GPUs would have cost (the plan's gpu_placement_usd_per_hour x 730): the saving
    environment  = node groups + the EKS control plane and the system node group when the stack creates the
                   cluster (system nodes: on-demand, 2-2-4 of cluster.systemInstanceType, priced from the table's
                   system_instances; not attributed to models, like the control plane)
    team         = the sum of its models' costs (models.yaml's ``team``; ``unassigned`` without one), so the
                   teams add up to the node groups; a created cluster's own costs are no team's

A region without a price is *unknown*: its node groups and totals are None, never guessed.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from ..plan.compiler import models_in
from ..plan.hardware.instances import InstanceCatalogue
from ..plan.hardware.node_price import HOURS_PER_MONTH, SPOT_ESTIMATED, estimate_node_price
from ..plan.teams import team_of
from ..plan.hardware.system_nodes import SYSTEM_DISK_GIB, SYSTEM_DISK_IOPS, SYSTEM_DISK_MIBPS, SYSTEM_GROUP, SYSTEM_SIZES
from ..plan.capacity.reservations import reservation_plan
from ..plan.sizing import nodes_for_pods
from ..plan.types import (FleetPlan, LlmEstimatesPlan, NodeGroupPlan, PlanModel, ReservationPlan, TritonModelPlan,
                          VllmModelPlan, VolumePlan)
from ..spec.environment import EnvironmentSpec
from ..spec.models import FleetSpec, LlmModelSpec
from .canary import CanaryCost, canary_costs

LEVELS = ("min", "desired", "max")
ATTRIBUTION_RULE = (
    "a node group costs nodes x (USD/h x 730 h + the node's EBS volume per month); each workload (a Triton "
    "server or a vLLM model) pays for the GPUs it holds, idle GPUs of the group shared pro rata, or for its whole "
    "nodes on a CPU group (one KIND_CPU server pod per node); models on a shared Triton server split its cost by "
    "gpu_share (the larger of their GPU-memory and compute fractions), or, when every gpu_share on a server "
    "rounds to 0, by GPU memory (equally if that is 0 too); on a KIND_CPU server, by the vCPUs their instances hold"
)


class MonthlyUsd(PlanModel):
    min: float
    desired: float
    max: float

    def at(self, level: str) -> float:
        return float(getattr(self, level))


class LlmLoad(PlanModel):
    """Load behind an LLM's cost per token, as models.yaml declares it (the plan's estimates say what the
    replicas generate at that load)."""

    peak_sequences: int | None  # peak_concurrent_sequences, when that is how the load is given
    peak_output_tokens_per_s: float | None  # the load in generated tokens/s, when it is given as a rate
    declared: str  # what models.yaml said, e.g. "peak_concurrent_sequences 32"


class UnitCost(PlanModel):
    metric: str  # "usd_per_1k_inferences" | "usd_per_million_tokens"
    # None: the replicas serve nothing measurable (the plan's throughput rounds to 0), so no finite unit cost;
    # the shortfall says so.
    value: float | None
    basis: str  # the load it is priced at, short enough for a table cell: "8 seq x 30 tok/s (default)"
    assumption: str  # the same load in full, with what models.yaml declared
    # Set when the replicas serve less than the declared peak: the figure is then priced at what they
    # serve, so it is not the cost of the peak a reviewer may assume.
    shortfall: str | None = None
    # A Triton model whose speed is not measured: what its capacity (and so its replicas) rests on instead;
    # None when measured (or for an LLM, whose estimates say their own source).
    unmeasured: str | None = None


class NodeGroupCost(PlanModel):
    name: str
    instance_type: str
    capacity_type: str
    usd_per_node_hour: float | None  # None: no price for this region
    price_basis: str
    volume: str  # each node's EBS volume, as the launch template provisions it
    volume_usd_per_node_month: float | None  # None: no EBS price for this region
    nodes: tuple[int, int, int]  # min, desired, max
    monthly_usd: MonthlyUsd | None
    # Of its nodes, those its reservations hold (paid by the reservation: only their volumes are charged here)
    # and, on spot, those kept on-demand for availability floors (priced on-demand); plan/capacity/.
    reserved_nodes: int = 0
    on_demand_base_nodes: int = 0
    # A spot pool's monthly cost at desired as a range: every spot node on the cheapest allowed type's spot
    # price, up to every one on the on-demand fallback (Karpenter falls back when spot is short); None: not spot.
    monthly_range_usd: tuple[float, float] | None = None
    range_basis: str = ""
    # Scale to zero: what its idle workloads' floor of one replica would hold, per idle hour (0: none idle).
    idle_saving_usd_per_hour: float = 0.0

    @property
    def usd_per_node_month(self) -> float | None:
        """One node for a month: its instance-hours and its volume (None when either price is unknown)."""
        if self.usd_per_node_hour is None or self.volume_usd_per_node_month is None:
            return None
        return self.usd_per_node_hour * HOURS_PER_MONTH + self.volume_usd_per_node_month


class ModelCost(PlanModel):
    name: str
    team: str  # models.yaml's team, "unassigned" without one
    serving: str
    node_group: str
    instance_type: str
    gpus: tuple[int, int, int]  # GPUs its workload holds (a shared Triton server's GPUs are shared; 0 on a CPU)
    attribution: str
    monthly_usd: MonthlyUsd | None
    unit_cost: UnitCost | None
    estimates: LlmEstimatesPlan | None = None  # an LLM's predicted speed at peak, as the plan says it
    device: str = "gpu"  # cpu: KIND_CPU instances on a CPU node group
    # A CPU model: what placing it on the GPUs would cost instead, USD/month at desired replicas (the plan's
    # gpu_placement_usd_per_hour x 730; None: no GPU placement holds it). The preview shows the saving.
    gpu_alternative_monthly_usd: float | None = None

    @property
    def saving_monthly_usd(self) -> float | None:
        """What the CPU placement saves against the GPU one a month, at desired (negative: it costs more)."""
        if self.gpu_alternative_monthly_usd is None or self.monthly_usd is None:
            return None
        return self.gpu_alternative_monthly_usd - self.monthly_usd.desired


class ReservationCost(PlanModel):
    """A capacity reservation, priced once: paid whether it runs anything or not (plan/capacity/reservations.py)."""

    id: str
    kind: str
    instance_type: str
    zone: str
    count: int
    ends: str | None
    usd_per_hour: float | None  # per instance
    price_basis: str
    monthly_usd: float | None  # count x usd_per_hour x 730; None: unknown
    used_nodes: int  # of the plan's nodes at desired it holds


class TeamCost(PlanModel):
    """What one team's models cost: the sum of their ModelCosts (None when any of them is unknown)."""

    name: str
    models: tuple[str, ...]
    monthly_usd: MonthlyUsd | None


class FleetCost(PlanModel):
    environment: str
    region: str
    capacity_type: str
    spot_price_ratio: float | None  # the stack's spot assumption (None on on-demand stacks)
    hours_per_month: float
    prices_as_of: str
    price_basis: tuple[str, ...]  # one line per price source used
    attribution_rule: str
    node_groups: tuple[NodeGroupCost, ...]
    models: tuple[ModelCost, ...]
    teams: tuple[TeamCost, ...]  # by name; they add up to the node groups (not the created cluster's costs)
    control_plane_monthly_usd: float | None  # None: the stack does not create the cluster
    system_nodes: NodeGroupCost | None  # a created cluster's system node group; None: the stack joins a cluster
    monthly_usd: MonthlyUsd | None  # None when any price is unknown
    unknown: tuple[str, ...]  # what could not be priced, and why
    canaries: tuple[CanaryCost, ...] = ()  # per canary workload (cost/canary.py): priced per rollout, not per month
    reservations: tuple[ReservationCost, ...] = ()  # in the total at every level: paid used or not

    @property
    def idle_saving_usd_per_hour(self) -> float:
        """What scaling idle workloads to zero saves per hour they are idle (the node groups' sum)."""
        return sum(g.idle_saving_usd_per_hour for g in self.node_groups)

    def model(self, name: str) -> ModelCost:
        return self._by_name("models")[name]  # indexed once (PlanModel): render and policy look up every model

    @property
    def pricing(self) -> str:
        """How the node-hours are priced, for the environment's row: "spot, assumed 50% of on-demand"."""
        if self.capacity_type != "spot":
            return self.capacity_type
        assumed = [g for g in self.node_groups if g.price_basis.startswith("spot assumed")]
        estimated = any(g.price_basis == SPOT_ESTIMATED for g in self.node_groups)  # the table's own estimate
        if not assumed:
            return "spot, ESTIMATED table" if estimated else "spot, dated table"
        some = "" if len(assumed) == len(self.node_groups) else (
            f" for {len(assumed)} of {len(self.node_groups)} node groups")
        rest = "; the rest from the ESTIMATED table" if estimated else ""
        return f"spot, assumed {self.spot_price_ratio:.0%} of on-demand{some}{rest}"

    def node_group(self, name: str) -> NodeGroupCost:
        return self._by_name("node_groups")[name]


def estimate_llm_loads(fleet: FleetSpec, environment: str) -> dict[str, LlmLoad]:
    """The load at peak per LLM, as the compiler read it (patches applied)."""
    loads = {}
    for _, model in models_in(fleet, environment):
        if isinstance(model, LlmModelSpec):
            sla = model.sla
            rate = sla.peak_output_tokens_per_s if sla.peak_requests_per_s is None else (
                sla.peak_requests_per_s * sla.output_tokens())
            declared = (f"peak_concurrent_sequences {sla.peak_concurrent_sequences}" if sla.peak_concurrent_sequences
                        is not None else f"peak_output_tokens_per_s {sla.peak_output_tokens_per_s:g}"
                        if sla.peak_output_tokens_per_s is not None else
                        f"peak_requests_per_s {sla.peak_requests_per_s:g} x {sla.output_tokens()} output tokens")
            loads[model.name] = LlmLoad(peak_sequences=sla.peak_concurrent_sequences, peak_output_tokens_per_s=rate,
                                        declared=declared)
    return loads


def compute_fleet_cost(plan: FleetPlan, catalogue: InstanceCatalogue, env: EnvironmentSpec,
                       loads: Mapping[str, LlmLoad]) -> FleetCost:
    """Monthly cost of one environment's plan; see the module docstring for every rule."""
    groups = tuple(_node_group_cost(g, g.root_volume, catalogue, env, idle_floor_nodes(plan, g))
                   for g in plan.node_groups)
    reservations = tuple(reservation_cost(r, plan) for g in plan.node_groups for r in g.reservations) + tuple(
        reservation_cost(r, plan) for r in unused_reservations(plan, env, catalogue))
    workloads = _workload_costs(plan, {g.name: g for g in groups})
    models = tuple(_model_cost(m, plan, workloads, loads) for m in plan.models)
    control = _control_plane(catalogue, env)
    system = estimate_system_nodes(catalogue, env)
    unknown = tuple(f"{g.instance_type}: {g.price_basis}" for g in groups if g.usd_per_node_hour is None)
    if system is not None and system.usd_per_node_hour is None:
        unknown += (f"system nodes {system.instance_type}: {system.price_basis}",)
    if any(g.volume_usd_per_node_month is None for g in (*groups, *((system,) if system else ()))):
        unknown += (f"EBS gp3 volumes: the price table's ebs_gp3 has no prices for {env.region}",)
    if control is None and env.cluster.create:
        unknown += ("EKS control plane: the price table has no eks_usd_per_cluster_hour",)
    unknown += tuple(f"reservation {r.id}: {r.price_basis}" for r in reservations if r.monthly_usd is None)
    paid = [g.monthly_usd for g in (*groups, *((system,) if system else ())) if g.monthly_usd]
    reserved = sum(r.monthly_usd or 0.0 for r in reservations)
    total = None if unknown else _sum(paid, (control or 0.0) + reserved)
    return FleetCost(
        environment=plan.environment, region=plan.region, capacity_type=plan.capacity_type,
        spot_price_ratio=env.cost.spot_price_ratio if plan.capacity_type == "spot" else None,
        hours_per_month=HOURS_PER_MONTH, prices_as_of=_as_of(catalogue, env.region),
        price_basis=_price_basis(catalogue, env), attribution_rule=ATTRIBUTION_RULE, node_groups=groups,
        models=models, teams=estimate_team_costs(models), control_plane_monthly_usd=control if env.cluster.create else None, system_nodes=system,
        monthly_usd=total, unknown=unknown, canaries=canary_costs(plan, {g.name: g for g in groups}),
        reservations=reservations)


def estimate_team_costs(models: tuple[ModelCost, ...]) -> tuple[TeamCost, ...]:
    """Each team's models and their summed cost, teams by name."""
    members: dict[str, list[ModelCost]] = defaultdict(list)
    for model in models:
        members[model.team].append(model)
    return tuple(TeamCost(name=team, models=tuple(m.name for m in group),
                          monthly_usd=None if any(m.monthly_usd is None for m in group)
                          else _sum([m.monthly_usd for m in group], 0.0))  # type: ignore[misc]
                 for team, group in sorted(members.items()))


def _node_group_cost(group: NodeGroupPlan, disk: VolumePlan, catalogue: InstanceCatalogue,
                     env: EnvironmentSpec, idle_nodes: int = 0) -> NodeGroupCost:
    price, basis = estimate_node_price(catalogue.node_type(group.instance_type), env.region,  # type: ignore[arg-type]
                                       group.capacity_type, env)
    priced = _priced_group(group.name, group.instance_type, group.capacity_type, price, basis,
                           (group.min_size, group.desired_size, group.max_size), disk, catalogue, env.region)
    if not (group.reserved_nodes or group.on_demand_base_nodes or group.capacity_type == "spot" or idle_nodes):
        return priced
    on_demand, _ = estimate_node_price(catalogue.node_type(group.instance_type), env.region,  # type: ignore[arg-type]
                                       "on-demand", env)
    return with_mix(priced, group, on_demand, _cheapest_spot(group, catalogue, env), idle_nodes)


def _cheapest_spot(group: NodeGroupPlan, catalogue: InstanceCatalogue, env: EnvironmentSpec) -> tuple[float, str] | None:
    """The cheapest spot price among the group's allowed types (its equivalents under Karpenter), and which."""
    prices = [(p, name) for name in group.allowed_types
              if (p := estimate_node_price(catalogue.node_type(name), env.region, "spot", env)[0]) is not None]  # type: ignore[arg-type]
    return min(prices) if prices else None


def with_mix(group: NodeGroupCost, plan_group: NodeGroupPlan, on_demand: float | None,
             cheapest: tuple[float, str] | None, idle_nodes: int) -> NodeGroupCost:
    """Reserved nodes charged only their volumes, the on-demand base at on-demand, the rest at the group's price;
    a spot group's range at desired; the idle saving of its scale-to-zero workloads."""
    volume, price = group.volume_usd_per_node_month, group.usd_per_node_hour
    if volume is None or price is None or (plan_group.on_demand_base_nodes and on_demand is None):
        return group
    od = on_demand if on_demand is not None else price

    def monthly(nodes: int, spot: float) -> float:
        billed = max(0, nodes - plan_group.reserved_nodes)
        base = min(billed, plan_group.on_demand_base_nodes)
        return nodes * volume + (base * od + (billed - base) * spot) * HOURS_PER_MONTH

    update: dict = {"reserved_nodes": plan_group.reserved_nodes, "on_demand_base_nodes": plan_group.on_demand_base_nodes,
                    "monthly_usd": MonthlyUsd(**{lvl: monthly(n, price) for lvl, n in zip(LEVELS, group.nodes)}),
                    "idle_saving_usd_per_hour": round(idle_nodes * (price + volume / HOURS_PER_MONTH), 4)}
    if group.capacity_type == "spot" and cheapest is not None and on_demand is not None:
        low, name = cheapest
        update["monthly_range_usd"] = (monthly(group.nodes[1], low), monthly(group.nodes[1], od))
        update["range_basis"] = (f"from every spot node on {name} at {low:.4g} USD/h (the cheapest allowed type's spot) "
                                 f"to every one on the on-demand fallback {group.instance_type} at {od:.4g} USD/h")
    return group.model_copy(update=update)


def idle_floor_nodes(plan: FleetPlan, group: NodeGroupPlan) -> int:
    """The nodes a floor of one replica of each scale-to-zero workload on ``group`` would hold."""
    pods: dict[int, int] = defaultdict(int)
    for s in plan.triton_servers:
        if s.node_group == group.name and s.cold_start is not None:
            pods[s.slots_per_replica] += 1
    for m in plan.models:
        if isinstance(m, VllmModelPlan) and m.node_group == group.name and m.cold_start is not None:
            pods[m.gpus_per_pod] += m.nodes_per_replica
    return nodes_for_pods(pods, group.pod_slots) if pods else 0


def reservation_cost(reservation: ReservationPlan, plan: FleetPlan) -> ReservationCost:
    used = sum(g.reserved_nodes for g in plan.node_groups if reservation in g.reservations)
    monthly = None if reservation.usd_per_hour is None else reservation.count * reservation.usd_per_hour * HOURS_PER_MONTH
    return ReservationCost(id=reservation.id, kind=reservation.kind, instance_type=reservation.instance_type,
                           zone=reservation.zone, count=reservation.count, ends=reservation.ends,
                           usd_per_hour=reservation.usd_per_hour, price_basis=reservation.price_basis,
                           monthly_usd=monthly, used_nodes=min(used, reservation.count))


def unused_reservations(plan: FleetPlan, env: EnvironmentSpec, catalogue: InstanceCatalogue) -> tuple[ReservationPlan, ...]:
    """The stack's reservations of types no node group runs: still paid."""
    planned = {g.instance_type for g in plan.node_groups}
    return tuple(reservation_plan(r, catalogue, env.region) for r in env.capacity_reservations
                 if r.instance_type not in planned)


def _priced_group(name: str, instance_type: str, capacity_type: str, price: float | None, basis: str,
                  nodes: tuple[int, int, int], disk: VolumePlan, catalogue: InstanceCatalogue,
                  region: str) -> NodeGroupCost:
    gp3 = catalogue.ebs_gp3.get(region)
    volume = None if gp3 is None else gp3.monthly(disk.size_gib, disk.iops, disk.throughput_mibps)
    group = NodeGroupCost(name=name, instance_type=instance_type, capacity_type=capacity_type,
                          usd_per_node_hour=price, price_basis=basis, nodes=nodes, monthly_usd=None,
                          volume=f"{disk.size_gib} GiB gp3 at {disk.iops} IOPS, {disk.throughput_mibps} MiB/s",
                          volume_usd_per_node_month=volume)
    per_node = group.usd_per_node_month
    if per_node is None:
        return group
    return group.model_copy(update={"monthly_usd": MonthlyUsd(**{lvl: n * per_node for lvl, n in zip(LEVELS, nodes)})})


def estimate_system_nodes(catalogue: InstanceCatalogue, env: EnvironmentSpec) -> NodeGroupCost | None:
    """A created cluster's system node group (None when the stack joins a cluster): always on-demand, even on
    a spot stack, as modelfleet/deploy creates it; unknown when the table has no price for the type there."""
    if not env.cluster.create:
        return None
    name = env.cluster.system_instance_type
    instance = catalogue.system_instances.get(name)
    price = None if instance is None else instance.price(env.region)
    basis = ("on-demand" if price is not None else "not in the price table's system_instances" if instance is None
             else f"no on-demand price for {env.region}")
    return _priced_group(SYSTEM_GROUP, name, "on-demand", price, basis, SYSTEM_SIZES,
                         VolumePlan(size_gib=SYSTEM_DISK_GIB, iops=SYSTEM_DISK_IOPS, throughput_mibps=SYSTEM_DISK_MIBPS), catalogue,
                         env.region)


def _control_plane(catalogue: InstanceCatalogue, env: EnvironmentSpec) -> float | None:
    if not env.cluster.create or catalogue.eks_usd_per_cluster_hour is None:
        return None
    return catalogue.eks_usd_per_cluster_hour * HOURS_PER_MONTH


def _sum(values: list[MonthlyUsd], extra: float) -> MonthlyUsd:
    return MonthlyUsd(**{lvl: sum(v.at(lvl) for v in values) + extra for lvl in LEVELS})


def _as_of(catalogue: InstanceCatalogue, region: str) -> str:
    """The date of the region's on-demand prices, else the table's own date."""
    source = catalogue.price_sources.get(region, {}).get("on-demand")
    return source.as_of if source else catalogue.as_of


def _price_basis(catalogue: InstanceCatalogue, env: EnvironmentSpec) -> tuple[str, ...]:
    sources = catalogue.price_sources.get(env.region, {})
    lines = []
    on_demand = sources.get("on-demand")
    lines.append(f"on-demand {env.region}: {on_demand.source}, as of {on_demand.as_of}" if on_demand
                 else f"on-demand {env.region}: no dated prices in the table")
    if env.capacity_type == "spot":
        spot = sources.get("spot")
        ratio = env.cost.spot_price_ratio
        fallback = ("types without a dated price unknown" if ratio is None else
                    f"types without a dated price ASSUMED at {ratio:.0%} of on-demand (modelfleet:cost.spotPriceRatio)")
        when = "" if spot is None else (f"estimated {spot.as_of}, not measured" if spot.estimated else f"as of {spot.as_of}")
        lines.append(f"spot {env.region}: {spot.source}, {when}; {fallback}" if spot else
                     f"spot {env.region}: no dated spot prices in the table; {fallback}")
    ebs = catalogue.ebs_price_sources.get(env.region)
    lines.append(f"EBS gp3 {env.region}: {ebs.source}, as of {ebs.as_of}" if ebs
                 else f"EBS gp3 {env.region}: no dated prices in the table")
    if env.cluster.create:
        system = catalogue.system_price_sources.get(env.region)
        lines.append(f"system nodes {env.region} (on-demand): {system.source}, as of {system.as_of}" if system
                     else f"system nodes {env.region}: no dated prices in the table")
    return tuple(lines)


# ---------------------------------------------------------------------------------------------- attribution
Workload = tuple[str, str]  # (node group, workload name)


def workload_gpus(plan: FleetPlan) -> dict[Workload, tuple[int, int, int]]:
    """What each Triton server and each vLLM model holds of its node group at min/desired/max: its GPUs, or
    (a KIND_CPU server) its whole CPU nodes."""
    out: dict[Workload, tuple[int, int, int]] = {}
    for s in plan.triton_servers:
        out[(s.node_group, s.name)] = tuple(s.slots_per_replica * r for r in (s.min_replicas, s.replicas, s.max_replicas))  # type: ignore[assignment]
    for m in plan.models:
        if isinstance(m, VllmModelPlan):
            out[(m.node_group, m.name)] = tuple(m.gpus_per_replica * r for r in (m.min_replicas, m.replicas, m.max_replicas))  # type: ignore[assignment]
    return out


def _workload_costs(plan: FleetPlan, groups: Mapping[str, NodeGroupCost]) -> dict[str, tuple[MonthlyUsd | None, str]]:
    """Each workload's share of its node group, and the sentence that says how (at desired replicas)."""
    gpus = workload_gpus(plan)
    held: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for (group, _), counts in gpus.items():
        for i, count in enumerate(counts):
            held[group][i] += count
    out: dict[str, tuple[MonthlyUsd | None, str]] = {}
    for (group, name), counts in gpus.items():
        monthly = groups[group].monthly_usd
        share = None if monthly is None else MonthlyUsd(**{
            lvl: monthly.at(lvl) * counts[i] / held[group][i] if held[group][i] else 0.0
            for i, lvl in enumerate(LEVELS)})
        unit = "nodes" if plan.node_group(group).device == "cpu" else "GPUs"
        out[name] = share, f"{counts[1]} of the {held[group][1]:g} {unit} used in {group}"
    return out


def _model_cost(model: TritonModelPlan | VllmModelPlan, plan: FleetPlan,
                workloads: Mapping[str, tuple[MonthlyUsd | None, str]], loads: Mapping[str, LlmLoad]) -> ModelCost:
    if isinstance(model, TritonModelPlan):
        server = plan.server(model.server)
        fraction, split = _server_fraction(model.name, server.models, plan)
        gpus = tuple(server.gpus_per_replica * r for r in (server.min_replicas, server.replicas, server.max_replicas))
        whole, held = workloads[server.name]
        attribution = f"{server.name} holds {held}; {split}"
    else:
        fraction = 1.0
        gpus = tuple(model.gpus_per_replica * r for r in (model.min_replicas, model.replicas, model.max_replicas))
        whole, held = workloads[model.name]
        attribution = f"its pods hold {held} ({model.gpus_per_replica} per replica)"
    monthly = None if whole is None else MonthlyUsd(**{lvl: whole.at(lvl) * fraction for lvl in LEVELS})
    unit = None if monthly is None else estimate_unit_cost(model, monthly.desired, loads.get(model.name))
    alternative = getattr(model, "gpu_placement_usd_per_hour", None)
    return ModelCost(name=model.name, team=team_of(model.team), serving=model.serving, node_group=model.node_group,
                     instance_type=model.instance_type, gpus=gpus, attribution=attribution,  # type: ignore[arg-type]
                     monthly_usd=monthly, unit_cost=unit, device=getattr(model, "device", "gpu"),
                     gpu_alternative_monthly_usd=None if alternative is None else alternative * HOURS_PER_MONTH,
                     estimates=model.estimates if isinstance(model, VllmModelPlan) else None)


def _server_fraction(name: str, members: tuple[str, ...], plan: FleetPlan) -> tuple[float, str]:
    """Its part of a shared server, and how. gpu_share first; the plan rounds it to 4 decimals, so models
    too small to show there all read 0, and then GPU memory (also rounded), then an equal split, decide."""
    if len(members) == 1:
        return 1.0, "alone on it"
    models = {n: plan.model(n) for n in members}
    others = ", ".join(n for n in members if n != name)
    cores = {n: m.cpu_cores if isinstance(m, TritonModelPlan) else 0 for n, m in models.items()}
    if all(isinstance(m, TritonModelPlan) and m.device == "cpu" for m in models.values()) and sum(cores.values()):
        return cores[name] / sum(cores.values()), (f"its KIND_CPU instances hold {cores[name]} of the "
                                                   f"{sum(cores.values())} vCPUs on it (with {others})")
    shares = {n: m.gpu_share if isinstance(m, TritonModelPlan) else 1.0 for n, m in models.items()}
    total = sum(shares.values())
    if total > 0:
        return shares[name] / total, f"gpu_share {shares[name]:g} of {total:g} on it (with {others})"
    memory = {n: m.gpu_memory_gib if isinstance(m, TritonModelPlan) else 0.0 for n, m in models.items()}
    held = sum(memory.values())
    zero = "every gpu_share on it is 0 (under 0.005% of a GPU each), so split by GPU memory: "
    if held > 0:
        return memory[name] / held, f"{zero}{memory[name]:g} of {held:g} GiB (with {others})"
    return 1.0 / len(members), f"{zero}all 0 too, so split equally, 1 of {len(members)} (with {others})"


def estimate_unit_cost(model: TritonModelPlan | VllmModelPlan, monthly_usd: float,
                       load: LlmLoad | None) -> UnitCost | None:
    """USD per 1,000 inferences (classic) or per million generated tokens (LLM) at peak load, or at what the
    replicas serve when that is less (and then says so: the figure is not the peak's)."""
    hourly = monthly_usd / HOURS_PER_MONTH
    if isinstance(model, TritonModelPlan):
        return _triton_unit_cost(model, hourly)
    if load is None or model.estimates is None:
        return None
    estimates = model.estimates
    served = model.replicas * estimates.output_tokens_per_s_per_replica
    short = _llm_shortfall(model, load, served)
    return UnitCost(metric="usd_per_million_tokens", value=_per_unit(hourly, served * 3600, 1e6),
                    basis=f"{served:,.0f} tok/s predicted", shortfall=short,
                    assumption=f"{model.replicas} replica(s) x {estimates.output_tokens_per_s_per_replica:,g} output "
                               f"tokens/s at {estimates.sequences_per_replica} sequence(s) each = {served:,.0f} tokens/s "
                               f"sustained ({load.declared}; predicted from {estimates.source})")


def _llm_shortfall(model: VllmModelPlan, load: LlmLoad, served: float) -> str | None:
    """What the replicas do not carry of the declared peak (pinned replicas, a single-replica stack): the SLA
    their simulated p99s miss, else the load they do not run."""
    e = model.estimates
    if e is not None and e.ttft_p99_bound_ms is not None and e.ttft_p99_bound_ms > model.p99_ttft_ms:
        return (f"misses the SLA: {model.replicas} replica(s) at peak, p99 TTFT {e.ttft_p99_ms:,.0f} ms (95% bound "
                f"{e.ttft_p99_bound_ms:,.0f}) against {model.p99_ttft_ms:,.0f} ms")
    if (e is not None and e.tpot_p99_bound_ms is not None and model.p99_tpot_ms is not None
            and e.tpot_p99_bound_ms > model.p99_tpot_ms):
        return (f"misses the SLA: {model.replicas} replica(s) at peak, p99 TPOT {e.tpot_p99_ms:,.1f} ms (95% bound "
                f"{e.tpot_p99_bound_ms:,.1f}) against {model.p99_tpot_ms:,.1f} ms")
    if load.peak_sequences is not None:
        running = model.replicas * model.max_num_seqs
        return None if running >= load.peak_sequences else (
            f"under-provisioned: {model.replicas} replica(s) x max_num_seqs {model.max_num_seqs} serve {running} of "
            f"the {load.peak_sequences} sequences at peak")
    wanted = load.peak_output_tokens_per_s or 0.0
    return None if served >= wanted * (1 - 1e-6) else (
        f"under-provisioned: {model.replicas} replica(s) generate {served:,.0f} of the {wanted:,.0f} tokens/s at peak")


def _triton_unit_cost(model: TritonModelPlan, hourly: float) -> UnitCost:
    capacity = model.replicas * model.instance_count * model.rps_per_instance
    rps = min(model.peak_rps, capacity)
    short = None if rps == model.peak_rps else (
        f"under-provisioned: {model.replicas} replica(s) serve {capacity:g} of the {model.peak_rps:g} "
        "inferences/s at peak")
    if rps <= 0:  # the plan keeps rps_per_instance to 2 decimals: a model slower than 0.005/s reads 0
        short = (f"under-provisioned: {model.replicas} replica(s) serve no measurable part of the "
                 f"{model.peak_rps:g} inferences/s at peak (rps_per_instance {model.rps_per_instance:g} in the "
                 "plan: under 0.005/s), so no finite cost per inference")
    return UnitCost(metric="usd_per_1k_inferences", value=_per_unit(hourly, rps * 3600, 1000),
                    basis=f"{rps:g} inferences/s", shortfall=short,
                    assumption=f"{rps:g} inferences/s sustained (peak_rps {model.peak_rps:g})",
                    unmeasured=None if model.measured else model.speed_basis)


def _per_unit(usd_per_hour: float, units_per_hour: float, scale: float) -> float | None:
    """USD per ``scale`` units, or None when nothing is served (an unbounded cost is no figure)."""
    return usd_per_hour / units_per_hour * scale if units_per_hour > 0 else None
