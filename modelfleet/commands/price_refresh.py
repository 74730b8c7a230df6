"""``modelfleet prices refresh``: one region's prices from the AWS Pricing API and the EC2 spot price history.

An edge adapter, the only module that talks to AWS; the compiler never imports it. The clients are
injected (boto3 clients built by the command; botocore Stubbers in tests), and the result is plain
catalogue data: the starting table, with the region's on-demand and spot prices replaced and dated, and
its vCPU, RAM and GPU counts checked against the Pricing API's product attributes (a difference is
taken from AWS and reported). An instance type AWS returns no single on-demand price for is left without
one (reported, never guessed); a type with no spot price has an unknown spot cost (unless a stack states a
``spotPriceRatio`` assumption), and the report says so.

The CPU types (``cpu_instances``, for KIND_CPU servers) are priced and checked like the GPU types, on-demand and
spot; their processor is checked too: the Pricing API's ``physicalProcessor`` must name the table's processor
(``cpus.<key>.code_name``, e.g. "Sapphire Rapids"), since measured CPU figures carry over only between
families of one processor. A difference is reported, never rewritten.

The system node types (``system_instances``: a created cluster's untainted nodes, never spot) get their
on-demand prices and vCPU/RAM the same way, dated in their own section; so do the EBS gp3 prices every
node's volume is billed at (``ebs_gp3``), from the products whose ``volumeApiName`` is gp3, told apart by the
unit of their price (per GB-month, IOPS-month, and MiB/s- or GiB/s-month for throughput).

GPU memory is only checked, not rewritten: AWS lists the nominal total (``gpuMemory: "96 GB"`` for four
24 GB GPUs) while the table records what CUDA leaves usable per GPU, some 1-8% less. A per-GPU nominal
figure the table's usable one does not fall within that of means the table names the wrong GPU model.

Spot: the latest price of each availability zone, and of those the dearest: node groups spread over
zones, and a budget should not depend on landing in the cheapest one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

import yaml

from ..errors import Issue, ModelfleetError

PRICING_REGION = "us-east-1"  # the Pricing API's own endpoint; it serves every region's prices
ON_DEMAND_SOURCE = "AWS Pricing API get_products (AmazonEC2, Linux, Shared tenancy, On-Demand)"
SPOT_SOURCE = "EC2 describe_spot_price_history (Linux/UNIX, latest per zone, dearest zone)"
EBS_SOURCE = "AWS Pricing API get_products (AmazonEC2, volumeApiName gp3, On-Demand)"
# The units the Pricing API prices gp3 in -> (ebs_gp3 key, factor to the table's unit). EBS "GB" is GiB;
# throughput has been listed both per MiB/s and per GiB/s a month. Any other unit is reported, never guessed.
GP3_UNITS = {"gb-mo": ("usd_per_gib_month", 1.0), "iops-mo": ("usd_per_iops_month", 1.0),
             "mibps-mo": ("usd_per_mibps_month", 1.0), "gibps-mo": ("usd_per_mibps_month", 1 / 1024)}


class PriceRefreshError(ModelfleetError):
    """AWS could not be asked (no credentials, no permission, no network): nothing was written."""


@dataclass(frozen=True)
class RefreshResult:
    data: dict[str, Any]  # the new catalogue
    report: tuple[str, ...]  # one line per fact a reviewer should know (missing types, spot failure)


def _filters(instance_type: str, region: str) -> list[dict[str, str]]:
    terms = {"instanceType": instance_type, "regionCode": region, "locationType": "AWS Region",
             "operatingSystem": "Linux", "tenancy": "Shared",
             "preInstalledSw": "NA", "capacitystatus": "Used", "licenseModel": "No License required",
             "operation": "RunInstances"}
    return [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in terms.items()]


def _pages(call: Any, key: str, **params: Any) -> Iterable[Any]:
    """Every item of a NextToken-paginated AWS call (the token is passed back until it is absent)."""
    token = None
    while True:
        response = call(**params, **({"NextToken": token} if token else {}))
        yield from response.get(key, [])
        token = response.get("NextToken")
        if not token:
            return


def parse_on_demand_prices(price_list: Iterable[str]) -> set[float]:
    """Hourly USD prices of the OnDemand terms in a get_products PriceList (each entry a JSON string)."""
    return parse_products(price_list)[0]


def parse_products(price_list: Iterable[str]) -> tuple[set[float], list[dict[str, str]]]:
    """The OnDemand hourly prices and every product's attributes of a get_products PriceList."""
    prices, attributes = set(), []
    for entry in price_list:
        product = json.loads(entry)
        attributes.append(product.get("product", {}).get("attributes", {}))
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = float(dimension.get("pricePerUnit", {}).get("USD", "0"))
                if dimension.get("unit") == "Hrs" and usd > 0:
                    prices.add(usd)
    return prices, attributes


@dataclass(frozen=True)
class OnDemand:
    prices: dict[str, float]  # instance type -> USD/hour
    attributes: dict[str, dict[str, str]]  # instance type -> the Pricing API's product attributes
    report: list[str]


def fetch_on_demand(pricing: Any, region: str, instance_types: Iterable[str]) -> OnDemand:
    """On-demand USD/hour and product attributes per instance type; no price or several: reported, not priced."""
    out = OnDemand({}, {}, [])
    for name in sorted(instance_types):
        found, attributes = parse_products(_pages(pricing.get_products, "PriceList", ServiceCode="AmazonEC2",
                                                  Filters=_filters(name, region), FormatVersion="aws_v1",
                                                  MaxResults=100))
        if attributes:
            out.attributes[name] = attributes[0]
        if len(found) == 1:
            out.prices[name] = found.pop()
        elif not found:
            out.report.append(f"{name}: no on-demand price in {region} (not offered there?); left unknown")
        else:
            out.report.append(f"{name}: several on-demand prices in {region} ({', '.join(map(str, sorted(found)))}); "
                              "left unknown")
    return out


HARDWARE = (("vcpu", "vcpu", int), ("ram_gib", "memory", float), ("gpus", "gpu", int))  # table key, AWS key, type
GPU_MEMORY_USABLE = (0.85, 1.0)  # usable GiB per GPU / nominal GB per GPU: CUDA leaves 1-8% of it in use


def _number(text: str) -> float | None:
    """``"2,048 GiB"`` -> 2048.0; ``"NA"`` -> None."""
    head = text.split()[0].replace(",", "") if text.strip() else ""
    try:
        return float(head)
    except ValueError:
        return None


def check_hardware(name: str, instance: dict[str, Any], gpus: dict[str, Any],
                   attributes: dict[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The table's hardware of ``name`` against AWS's attributes: (fields to take from AWS, report lines)."""
    updates, report = {}, []
    for key, aws_key, kind in HARDWARE:
        if key not in instance:  # a system type has no GPUs
            continue
        value = _number(attributes.get(aws_key, ""))
        if value is not None and kind(value) != instance[key]:
            updates[key] = kind(value)
            report.append(f"{name}: {key} {instance[key]} in the table, {kind(value)} from the Pricing API "
                          f"({aws_key}: {attributes[aws_key]!r}); taken from AWS")
    if "cpu" in instance:
        report += _processor_report(name, instance, gpus, attributes)
    if "gpu" not in instance:
        return updates, report
    nominal, count = _number(attributes.get("gpuMemory", "")), updates.get("gpus", instance["gpus"])
    usable = float(gpus[instance["gpu"]]["memory_gib"])
    if nominal and count and not GPU_MEMORY_USABLE[0] <= usable / (nominal / count) <= GPU_MEMORY_USABLE[1]:
        report.append(f"{name}: the Pricing API lists {attributes['gpuMemory']} of GPU memory ({nominal / count:g} GB "
                      f"per GPU) but the table's {instance['gpu']} has {usable:g} GiB usable per GPU: check which GPU "
                      "the table names for it (left as it is)")
    return updates, report


def _processor_report(name: str, instance: dict[str, Any], cpus: dict[str, Any], attributes: dict[str, str]) -> list[str]:
    """A CPU type whose Pricing API processor is not the table's (``cpus`` here: the table's processors)."""
    listed, wanted = attributes.get("physicalProcessor", ""), cpus[instance["cpu"]]["code_name"]
    squeeze = lambda text: text.lower().replace(" ", "")  # noqa: E731  "Icelake" and "Ice Lake" are one name
    if not listed or squeeze(wanted) in squeeze(listed):
        return []
    return [f"{name}: the Pricing API lists physicalProcessor {listed!r}, but the table says {instance['cpu']} "
            f"({wanted}): measured CPU figures would carry over to the wrong families; check it (left as it is)"]


def fetch_spot(ec2: Any, instance_types: Iterable[str], now: datetime) -> dict[str, float]:
    """Current spot USD/hour per instance type: latest per availability zone, dearest zone."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for item in _pages(ec2.describe_spot_price_history, "SpotPriceHistory", InstanceTypes=sorted(instance_types),
                       ProductDescriptions=["Linux/UNIX"], StartTime=now):
        key = (item["InstanceType"], item["AvailabilityZone"])
        stamp = item["Timestamp"]
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, float(item["SpotPrice"]))
    dearest: dict[str, float] = {}
    for (name, _), (_, price) in sorted(latest.items()):
        dearest[name] = max(price, dearest.get(name, 0.0))
    return dearest


def fetch_gp3(pricing: Any, region: str) -> tuple[dict[str, float] | None, list[str]]:
    """The region's EBS gp3 prices (storage per GiB-month, IOPS and MiB/s above the included, a month), or
    None and why: all three are needed, each must be one positive price (a free included tier is skipped)."""
    filters = [{"Type": "TERM_MATCH", "Field": field, "Value": value} for field, value in (
        ("volumeApiName", "gp3"), ("regionCode", region), ("locationType", "AWS Region"))]
    found: dict[str, set[float]] = {}
    odd: set[str] = set()
    for entry in _pages(pricing.get_products, "PriceList", ServiceCode="AmazonEC2", Filters=filters,
                        FormatVersion="aws_v1", MaxResults=100):
        for term in json.loads(entry).get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = float(dimension.get("pricePerUnit", {}).get("USD", "0"))
                unit = str(dimension.get("unit", ""))
                if usd <= 0:
                    continue
                if unit.lower() not in GP3_UNITS:
                    odd.add(unit)
                    continue
                key, factor = GP3_UNITS[unit.lower()]
                found.setdefault(key, set()).add(round(usd * factor, 10))
    report = [f"EBS gp3 in {region}: a price in an unknown unit {unit!r} was ignored" for unit in sorted(odd)]
    problems = [f"no {key}" if key not in found else
                f"several {key} ({', '.join(f'{p:g}' for p in sorted(found[key]))})"
                for key in ("usd_per_gib_month", "usd_per_iops_month", "usd_per_mibps_month")
                if len(found.get(key, ())) != 1]
    if problems:
        return None, report + [f"EBS gp3 in {region}: {'; '.join(problems)} from the Pricing API; left unknown "
                               "(node volumes, and so the totals, are unpriced there)"]
    return {key: prices.pop() for key, prices in sorted(found.items())}, report


def refresh_prices(data: dict[str, Any], region: str, pricing: Any, ec2: Any | None, now: datetime) -> RefreshResult:
    """The catalogue ``data`` with ``region``'s prices fetched afresh and its hardware checked; ``ec2=None``
    skips spot. A failing Pricing API call raises (botocore's error); a failing spot call is reported."""
    from botocore.exceptions import BotoCoreError, ClientError  # the clients are botocore's, so botocore is here

    cpu_types = data.get("cpu_instances") or {}
    names = sorted([*data["instances"], *cpu_types])
    system_types = (data.get("system_instances") or {}).get("types") or {}
    on_demand = fetch_on_demand(pricing, region, names)
    system = fetch_on_demand(pricing, region, system_types)
    ebs, ebs_report = fetch_gp3(pricing, region)
    report, hardware = list(on_demand.report) + system.report + ebs_report, {}
    for table, fetched, kinds in ((data["instances"], on_demand, data["gpus"]), (cpu_types, on_demand, data.get("cpus")),
                                  (system_types, system, {})):
        for name in sorted(set(table) & set(fetched.attributes)):
            hardware[name], lines = check_hardware(name, table[name], kinds or {}, fetched.attributes[name])
            report += lines
    spot: dict[str, float] | None = None
    if ec2 is not None:
        try:
            spot = fetch_spot(ec2, names, now)
        except (ClientError, BotoCoreError) as exc:  # AWS said no: on-demand still stands
            report.append(f"spot prices not refreshed ({type(exc).__name__}: {exc}); the region's spot figures are "
                          "removed, so spot stacks' costs are unknown unless they state modelfleet:cost.spotPriceRatio")
    if spot is not None:
        report += [f"{n}: no spot price in {region}; its spot cost is unknown unless a stack states "
                   "modelfleet:cost.spotPriceRatio" for n in names if n not in spot]
    refreshed = compute_refreshed_data(data, region, on_demand.prices, spot, now.date(), hardware, system.prices, ebs)
    return RefreshResult(refreshed, tuple(report))


def compute_refreshed_data(data: dict[str, Any], region: str, on_demand: dict[str, float],
                           spot: dict[str, float] | None, today: date,
                           hardware: dict[str, dict[str, Any]] | None = None,
                           system: dict[str, float] | None = None,
                           ebs: dict[str, float] | None = None) -> dict[str, Any]:
    """Replace one region's prices (and their dated sources), and hardware AWS corrected, in a copy of ``data``;
    ``system``: the system types' on-demand prices (None: that section is left as it is); ``ebs``: the gp3
    prices (None: none were found, so the region's are removed: unknown, not stale)."""
    out = copy.deepcopy(data)
    section = out.setdefault("ebs_gp3", {})
    for key in ("usd_per_gib_month", "usd_per_iops_month", "usd_per_mibps_month"):
        _set_price(section, key, region, None if ebs is None else ebs[key])
    sources = section.setdefault("prices", {})
    if ebs is None:
        sources.pop(region, None)
    else:
        sources[region] = {"as_of": today.isoformat(), "source": EBS_SOURCE}
    if system is not None and out.get("system_instances"):
        section = out["system_instances"]
        for name, instance in (section.get("types") or {}).items():
            instance.update((hardware or {}).get(name, {}))
            _set_price(instance, "usd_per_hour", region, system.get(name))
        section.setdefault("prices", {})[region] = {"as_of": today.isoformat(), "source": ON_DEMAND_SOURCE}
    for name, instance in [*out["instances"].items(), *(out.get("cpu_instances") or {}).items()]:
        instance.update((hardware or {}).get(name, {}))
        _set_price(instance, "usd_per_hour", region, on_demand.get(name))
        _set_price(instance, "spot_usd_per_hour", region, None if spot is None else spot.get(name))
    sources = out.setdefault("prices", {}).setdefault(region, {})
    sources["on-demand"] = {"as_of": today.isoformat(), "source": ON_DEMAND_SOURCE}
    if spot is not None:
        sources["spot"] = {"as_of": today.isoformat(), "source": SPOT_SOURCE}
    else:
        sources.pop("spot", None)
    dates = [kind["as_of"] for kinds in out["prices"].values() for kind in kinds.values()]
    out["as_of"] = max(dates)
    out["source"] = "modelfleet prices refresh; each region's source and date under `prices`"
    return out


def _set_price(instance: dict[str, Any], key: str, region: str, price: float | None) -> None:
    prices = dict(instance.get(key) or {})
    if price is None:
        prices.pop(region, None)
    else:
        prices[region] = price
    if prices or key == "usd_per_hour":
        instance[key] = dict(sorted(prices.items()))
    else:
        instance.pop(key, None)


def render_catalogue_yaml(data: dict[str, Any], region: str) -> str:
    """The catalogue file: a header saying what wrote it, then the data with sorted keys."""
    header = (f"# Written by `modelfleet prices refresh --region {region}`. Hardware from the starting table;\n"
              "# prices and their dates per region under `prices`. Use it with `--prices FILE`.\n")
    return header + yaml.safe_dump(data, sort_keys=True, default_flow_style=None, width=120)


def missing_credentials_error() -> PriceRefreshError:
    return PriceRefreshError([Issue("", 0, 0, "prices refresh", "no AWS credentials found",
                                    "configure credentials (AWS_PROFILE, AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or "
                                    "an instance role) with pricing:GetProducts and ec2:DescribeSpotPriceHistory")])
