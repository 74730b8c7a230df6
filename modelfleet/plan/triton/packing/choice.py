"""Choosing the GPU instance type the classic models are packed onto: the allowed types, cheapest first.

Packing is most of a Triton compile's time (1,000 models: a few hundredths of a second per instance type, and
prod allows 27). A type whose packing cannot rank among the cheapest few need not be packed. ``usd_floor`` is
what *any* packing of the models on a type costs at least, from what no server can escape:

- a server of one unit that needs a GPU of its own (``dedicated_gpu``, or more than one GPU of compute) runs the
  replicas ``packed_server`` gives it: worked out here exactly as the packing does;
- a shared server runs at least the replicas its neediest member asks, and holds at most one GPU's memory and
  one pod's host RAM of models. So the shared servers' replicas total at least the sum, over the models, of
  their share of a GPU's memory times their need (and likewise of host RAM), at least their compute (a model
  pinned alone on a server runs its pin instead), at least the needs of the models over half a GPU's memory
  or half a pod's host RAM (no two of them share a server), and at least the largest need;
- those pods, beside what other workloads hold there (``in_use``), take nodes; each node costs at least the
  cheaper of the stack's node-hour and the on-demand one (a spot stack's availability floors run on-demand).

The types are packed in the order of their floors. Once ``exact`` of them fit and the next floor is dearer than
the ``exact``-th cheapest packing found, no type left can rank among those ``exact``: each is reported as
``Unpacked``, with its floor. The first ``exact`` fits are therefore the ones packing every type gives: the
same types, servers, prices and order (tests/plan/test_packing_choice.py checks it on generated fleets). The
floor is a bound, not a price, and the plan says so ("costs at least").
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from ....spec.environment import EnvironmentSpec
from ....spec.models import ClassicModelSpec
from ....spec.pipelines import PipelineSpec
from ...capacity.reservations import reserved_count
from ...hardware.instances import InstanceCatalogue, InstanceType
from ...hardware.node_price import ranking_usd_per_hour
from ...rejection import Rejection
from ..pipelines import PipelineSizing, together
from ..policy import ClassicSizing
from .binpacking import COMPUTE, HOST, MEMORY, Objective
from .gpu import (Asks, ClassicPlacement, PackedServer, capacity_of, checked_on, host_capacity_gib, host_room,
                  pack_checked, packed_server, pools, server_ram_gib, split_units, unit_items)

# How much dearer than the last needed packing a floor must be to skip its type: floors and prices are summed
# in different orders, so a type whose floor is its price must not be skipped by a rounding difference.
RELATIVE_MARGIN = 1e-9


@dataclass(frozen=True)
class Unpacked:
    """An instance type not packed: any packing of the models there costs at least ``usd_floor`` an hour, more
    than the ``cheaper`` packings found on other types."""

    instance: InstanceType
    usd_floor: float
    gpus: int  # GPUs the models' servers take there at least
    cheaper: int

    @property
    def option(self) -> str:
        return self.instance.name

    @property
    def reason(self) -> str:
        return (f"costs at least {self.usd_floor:.2f} USD/h, a lower bound (its servers need {self.gpus} GPU(s) "
                f"there at least, by GPU memory, host RAM and compute): not packed, as {self.cheaper} packings cost "
                "less")


Result = ClassicPlacement | Rejection | Unpacked


def gpu_placements(models: list[ClassicModelSpec], pipelines: tuple[PipelineSpec, ...], env: EnvironmentSpec,
                   catalogue: InstanceCatalogue, in_use: dict[str, tuple[int, int]],
                   sizing_cache: dict | None = None,
                   exact: int | None = None) -> tuple[list[ClassicPlacement], list[Result]]:
    """The allowed GPU types' packings of ``models``, cheapest first (then fewer GPUs, then the name), and what
    became of every type, in the catalogue's order (a Rejection says why a type cannot host them).

    ``exact``: how many of the cheapest packings the caller needs (None: every type is packed); the types
    that cannot rank among them are ``Unpacked`` (module docstring). ``sizing_cache``: per GPU model, for
    this very set of models and pipelines only."""
    cache: dict = {} if sizing_cache is None else sizing_cache
    instances = catalogue.in_families(env.instance_families)
    results: dict[str, Result] = {}
    candidates = []
    for instance in instances:
        checked = checked_on(models, env, catalogue, instance, cache, pipelines)
        if isinstance(checked, Rejection):
            results[instance.name] = checked
            continue
        held = in_use.get(instance.name, (0, 0))
        floor = (0.0, 0) if exact is None else usd_floor(models, checked, env, catalogue, instance, held, pipelines)
        candidates.append((floor, instance, checked, held))
    fits: list[ClassicPlacement] = []
    for (usd, gpus), instance, checked, held in sorted(candidates, key=lambda c: (c[0][0], c[1].gpus, c[1].name)):
        if exact is not None and len(fits) >= exact:
            needed = fits[exact - 1].usd_per_hour
            if usd > needed + RELATIVE_MARGIN * max(1.0, abs(needed)):
                results[instance.name] = Unpacked(instance, usd, gpus, exact)
                continue
        placed = pack_checked(models, checked, env, catalogue, instance, held, pipelines)
        results[instance.name] = placed
        if isinstance(placed, ClassicPlacement):
            bisect.insort(fits, placed, key=_rank)
    return fits, [results[i.name] for i in instances]


def _rank(placement: ClassicPlacement) -> tuple[float, int, str]:
    return placement.usd_per_hour, placement.instance.gpus, placement.instance.name


def usd_floor(models: list[ClassicModelSpec], checked: tuple[PipelineSizing, Asks], env: EnvironmentSpec,
              catalogue: InstanceCatalogue, instance: InstanceType, in_use: tuple[int, int] = (0, 0),
              pipelines: tuple[PipelineSpec, ...] = ()) -> tuple[float, int]:
    """(USD/h any packing of ``models`` on ``instance`` adds to its node group at least, the GPUs its servers
    take there at least), as ``pack_checked`` would price it (module docstring). (0.0, 0) where no bound is
    worth having: a server that the packing rejects (it says why), or a type without a price."""
    sized, asks = checked
    sizings = sized.sizings
    groups = together(list(pipelines))
    capacity, host_capacity = capacity_of(instance), host_capacity_gib(instance, env)
    pods, spread = in_use
    ram = server_ram_gib(instance, env)
    for pool, members in pools(models, instance):
        alone, shared = split_units(members, sizings, asks, groups)
        for unit in alone:
            server = packed_server(unit, sizings, asks, env, instance, pool, ram)
            if not isinstance(server, PackedServer):
                return 0.0, 0
            pods += server.replicas
            if server.spread_zones:
                spread = max(spread, server.min_replicas)
        pods += shared_pods_floor(shared, sizings, asks, capacity, host_capacity,
                                  1 if env.replicas.single_replica else math.inf)
    objective = Objective(instance.gpus)
    before, nodes = objective.score(*in_use)[0], objective.score(pods, spread)[0]
    reserved = reserved_count(env, instance.name)
    # every node beyond the reserved ones at the stack's price, or every one on-demand: the cheaper of the two
    total = min(ranking_usd_per_hour(catalogue, instance, env, nodes, reserved=reserved, on_demand_base=base)
                for base in (0, nodes))
    usd = total - ranking_usd_per_hour(catalogue, instance, env, before, reserved=reserved)
    return (usd, pods - in_use[0]) if math.isfinite(usd) else (0.0, 0)


def shared_pods_floor(shared: list[list[ClassicModelSpec]], sizings: dict[str, ClassicSizing], asks: Asks,
                      capacity: float, host_capacity: float, max_replicas: float = math.inf) -> int:
    """Pods the shared servers of one pool run at least (module docstring), with the limits pack_bins packs
    them under: a GPU's ``capacity`` of memory, and ``host_capacity`` less the room kept for loading; a server
    runs at most ``max_replicas`` (1 on a single-replica stack, whose servers' compute is bounded instead). A
    unit over a limit sits alone on its server: its share counts as one server's."""
    if not shared:
        return 0
    room = host_room(shared, sizings, host_capacity)
    memory = host = compute = 0.0
    most = large = 0
    for unit, item in zip(shared, unit_items(shared, sizings, asks)):
        need = item.need
        most = max(most, need)
        gpu_share = min(1.0, item.size[MEMORY] / capacity)
        host_share = min(1.0, item.size[HOST] / room) if room > 0 else 0.0
        memory += gpu_share * need
        host += host_share * need
        if max(gpu_share, host_share) > 0.5 + 1e-9:  # no two such units share a server: each is on one of its own
            large += need
        if not (len(unit) == 1 and unit[0].overrides.replicas):  # a pinned model alone runs its pin
            compute += min(max_replicas, item.size[COMPUTE])
    # sums of floats: a total that is a whole number of servers must not round up to one more
    return max(most, large, math.ceil(max(memory, host, compute) - 1e-6 * len(shared)))
