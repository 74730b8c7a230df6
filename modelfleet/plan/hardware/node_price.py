"""What one node costs, as the compiler ranks placements and as the cost model charges for them.

One definition for both, so that the compiler's cheapest choice is the cheapest in the cost preview: the
instance-hour at the stack's capacity type (the table's dated spot price, else the stack's stated
``spotPriceRatio`` of on-demand, else unknown) plus the node's root volume (EBS gp3, billed per month). Ranking only the instance-hours let a
packing onto more, cheaper nodes win by cents an hour while their volumes made it dearer a month, so adding a
model could lower the monthly cost (found by tests/cost/test_monotone.py).
"""

from __future__ import annotations

import math

from ...spec.environment import EnvironmentSpec
from .instances import InstanceCatalogue, InstanceType

HOURS_PER_MONTH = 730.0  # AWS's month, as its pricing pages and the cost preview count it
PRICE_REFERENCE_REGION = "us-east-1"  # ranks instance types when the stack's region has no price data
GP3_BASELINE_MIBPS, GP3_BASELINE_IOPS = 125, 3000
# What a spot figure from the table rests on: a dated price (DescribeSpotPriceHistory via `prices refresh`), or
# the table's own estimate (its region's spot source is marked ``estimated``).
SPOT_DATED = "spot (dated table)"
SPOT_ESTIMATED = "spot (table ESTIMATE, not a measured price)"


def estimate_node_price(instance: InstanceType | None, region: str, capacity_type: str,
                        env: EnvironmentSpec) -> tuple[float | None, str]:
    """USD per node-hour and where it came from; (None, why) when the table has no price for the region."""
    if instance is None:
        return None, "not in the price table"
    on_demand = instance.price(region)
    if capacity_type != "spot":
        return (on_demand, "on-demand") if on_demand is not None else (None, f"no on-demand price for {region}")
    spot = instance.spot_price(region)
    if spot is not None:
        return spot, SPOT_ESTIMATED if region in instance.spot_estimated else SPOT_DATED
    ratio = env.cost.spot_price_ratio
    if on_demand is None or ratio is None:
        return None, (f"no spot price for {region} in the table" + ("" if on_demand is None else
                      " (run `modelfleet prices refresh`, or state modelfleet:cost.spotPriceRatio)"))
    return on_demand * ratio, f"spot assumed at {ratio:.0%} of on-demand {on_demand:.8g}"


def ranking_usd_per_node_hour(catalogue: InstanceCatalogue, instance: InstanceType, env: EnvironmentSpec) -> float:
    """One node's hour for choosing between placements: its price on this stack and its root volume at the
    stack's floor size (``deploy.nodeDiskGib``, gp3 baseline), per hour. Priced in the reference region when
    the stack's has no data (a choice must still be made; the cost preview then says "unknown"); ``inf``
    when neither has a price."""
    hourly, volume = ranking_node_hour(catalogue, instance, env)
    return hourly + volume


def ranking_usd_per_hour(catalogue: InstanceCatalogue, instance: InstanceType, env: EnvironmentSpec, nodes: int, *,
                         reserved: int = 0, on_demand_base: int = 0) -> float:
    """``nodes`` of a type for an hour at the ranking price, as the cost preview charges a group
    (cost/fleet.py ``with_mix``): every node's root volume; the instance-hours of the nodes beyond ``reserved``
    (a reservation is paid already), of which, on a spot stack, an ``on_demand_base`` on-demand (the
    availability floors spot cannot carry, capacity/provisioning.py) and the rest at the stack's spot price."""
    hourly, volume = ranking_node_hour(catalogue, instance, env)
    billed = max(0, nodes - reserved)
    base = min(billed, on_demand_base) if env.capacity_type == "spot" else 0
    total = nodes * volume
    if base:
        on_demand, _ = _priced(instance, env, "on-demand")
        total += base * (hourly if on_demand is None else on_demand)
    return total + (billed - base) * hourly if billed > base else total


def ranking_node_hour(catalogue: InstanceCatalogue, instance: InstanceType, env: EnvironmentSpec) -> tuple[float, float]:
    """``ranking_usd_per_node_hour`` in its two parts: (the instance-hour at the stack's capacity type, the root
    volume's hour). A reserved node (capacity/reservations.py) is paid for already, but not its volume."""
    hourly, region = _priced(instance, env, env.capacity_type)
    if hourly is None:
        return math.inf, 0.0
    gp3 = catalogue.ebs_gp3.get(region)
    volume = 0.0 if gp3 is None else gp3.monthly(env.deploy.node_disk_gib, GP3_BASELINE_IOPS, GP3_BASELINE_MIBPS)
    return hourly, volume / HOURS_PER_MONTH


def _priced(instance: InstanceType, env: EnvironmentSpec, capacity: str) -> tuple[float | None, str]:
    """(the instance-hour at ``capacity``, the region it is from): the stack's region, else the reference
    region's (every ranking is then at one region's prices); None when neither has one."""
    for region in (env.region, PRICE_REFERENCE_REGION):
        hourly, _ = estimate_node_price(instance, region, capacity, env)
        if hourly is not None:
            return hourly, region
    return None, PRICE_REFERENCE_REGION
