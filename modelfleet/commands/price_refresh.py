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
zones, and a budget should not depend on landing in the cheapest one. Only the region's own zones count: a
Local Zone's or Wavelength Zone's price (e.g. zone ID ``use1-atl2-az1``, Atlanta) is not what a node
group on the region's subnets pays (it ran to 3.40 USD/h, above the 2.72 on-demand price, for c6i.16xlarge in
one snapshot), so it is skipped.

Spot can also come from a file: ``--spot-from-csv`` reads per-zone rows in the columns of SkyPilot's AWS
catalogue (``InstanceType``, ``Price``, ``SpotPrice``, ``Region``, ``AvailabilityZone``; SkyPilot fills it
from the same DescribeSpotPriceHistory call), takes the same dearest regional zone, leaves on-demand as it
is (a file's on-demand price that differs from the table's is reported, never taken), and dates the spot
figures with the file's own ``# as_of:`` and ``# source:`` lines.
"""

from __future__ import annotations

import copy
import csv
import io
import json
import re
from collections.abc import Iterable, Mapping
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


# One of a region's own availability zones: a zone name is the region and a letter (us-east-1a), a zone ID a
# short region code, "-az" and a number (use1-az4). Local and Wavelength Zones have a location in theirs
# (us-east-1-atl-2a, use1-atl2-az1, us-east-1-wl1-bos-wlz-1).
REGIONAL_ZONE = re.compile(r"[a-z]{2}(?:-[a-z]+)+-\d[a-z]|[a-z]+\d-az\d+")


def is_regional_zone(zone: str) -> bool:
    """True for a region's own availability zone (name or ID), False for a Local or Wavelength Zone."""
    return REGIONAL_ZONE.fullmatch(zone) is not None


def dearest_zone_prices(prices: Iterable[tuple[str, str, float]]) -> dict[str, float]:
    """(instance type, zone, USD/hour) -> each type's dearest price over the region's own zones, rounded as the
    table rounds (4 decimals); a Local or Wavelength Zone's price is skipped."""
    dearest: dict[str, float] = {}
    for name, zone, price in prices:
        if is_regional_zone(zone):
            dearest[name] = max(price, dearest.get(name, 0.0))
    return {name: round(price, 4) for name, price in sorted(dearest.items())}


def fetch_spot(ec2: Any, instance_types: Iterable[str], now: datetime) -> dict[str, float]:
    """Current spot USD/hour per instance type: latest per availability zone, dearest regional zone."""
    latest: dict[tuple[str, str], tuple[datetime, float]] = {}
    for item in _pages(ec2.describe_spot_price_history, "SpotPriceHistory", InstanceTypes=sorted(instance_types),
                       ProductDescriptions=["Linux/UNIX"], StartTime=now):
        key = (item["InstanceType"], item["AvailabilityZone"])
        stamp = item["Timestamp"]
        if key not in latest or stamp > latest[key][0]:
            latest[key] = (stamp, float(item["SpotPrice"]))
    return dearest_zone_prices((name, zone, price) for (name, zone), (_, price) in latest.items())


CATALOG_COLUMNS = ("InstanceType", "Price", "SpotPrice", "Region", "AvailabilityZone")  # SkyPilot's names


@dataclass(frozen=True)
class SpotCatalog:
    """A file of per-zone spot prices (SkyPilot's AWS catalogue columns) and what it says of itself."""

    rows: tuple[Mapping[str, str], ...]
    source: str  # its ``# source:`` line: where the rows come from (recorded as the spot prices' source)
    as_of: str  # its ``# as_of:`` line (YYYY-MM-DD)


def read_spot_catalog(text: str, path: str) -> SpotCatalog:
    """The rows of a spot catalogue file: ``#`` lines are comments, of which ``# source: TEXT`` and
    ``# as_of: YYYY-MM-DD`` are required (the table records both); then a CSV header naming CATALOG_COLUMNS."""
    notes: dict[str, str] = {}
    body = []
    for line in text.splitlines():
        if line.startswith("#"):
            key, _, value = line[1:].partition(":")
            notes.setdefault(key.strip(), value.strip())
        else:
            body.append(line)
    problems = [f"no `# {key}:` line" for key in ("source", "as_of") if not notes.get(key)]
    if notes.get("as_of") and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", notes["as_of"]):
        problems.append(f"`# as_of: {notes['as_of']}` is not a date (YYYY-MM-DD)")
    reader = csv.DictReader(io.StringIO("\n".join(body)))
    missing = [c for c in CATALOG_COLUMNS if c not in (reader.fieldnames or ())]
    if missing:
        problems.append(f"no column {', '.join(missing)} in the header")
    if problems:
        raise PriceRefreshError([Issue(path, 0, 0, "prices refresh --spot-from-csv", "; ".join(problems),
                                       "start the file with `# source: <where its rows come from>` and `# as_of: "
                                       f"<date>` lines, then a CSV header with {', '.join(CATALOG_COLUMNS)}")])
    return SpotCatalog(tuple(reader), notes["source"], notes["as_of"])


def spot_from_catalog_rows(rows: Iterable[Mapping[str, str]], region: str, instance_types: Iterable[str],
                           on_demand: Mapping[str, float] | None = None) -> tuple[dict[str, float], list[str]]:
    """Spot USD/hour per instance type from per-zone catalogue rows, as ``fetch_spot`` takes them (one price per
    zone, the dearest of the region's own zones), and report lines: types with no spot price there, Local or
    Wavelength Zones skipped, and on-demand prices (``on_demand``: the table's) the file states differently.
    Rows of other regions or types are ignored; an empty SpotPrice is no price."""
    wanted = set(instance_types)
    prices: list[tuple[str, str, float]] = []
    skipped: dict[str, list[str]] = {}
    listed: dict[str, set[float]] = {}
    for row in rows:
        name, zone = row["InstanceType"], row["AvailabilityZone"]
        if row["Region"] != region or name not in wanted:
            continue
        if row.get("Price"):
            listed.setdefault(name, set()).add(_usd(row, "Price"))
        if not row["SpotPrice"]:
            continue
        if not is_regional_zone(zone):
            skipped.setdefault(zone, []).append(name)
        prices.append((name, zone, _usd(row, "SpotPrice")))
    spot = dearest_zone_prices(prices)
    report = [f"{zone}: not one of {region}'s own availability zones (a Local or Wavelength Zone); its spot prices "
              f"skipped ({len(names)} type(s))" for zone, names in sorted(skipped.items())]
    report += [f"{n}: no spot price in {region}; its spot cost is unknown unless a stack states "
               "modelfleet:cost.spotPriceRatio" for n in sorted(wanted) if n not in spot]
    for name, found in sorted(listed.items()) if on_demand is not None else ():
        table = on_demand.get(name)
        if table is None or any(abs(price - table) > 1e-6 for price in found):
            report.append(f"{name}: on-demand {', '.join(f'{p:g}' for p in sorted(found))} USD/h in the file, "
                          f"{'unknown' if table is None else f'{table:g}'} in the table (left as it is)")
    return spot, report


def _usd(row: Mapping[str, str], key: str) -> float:
    try:
        return float(row[key])
    except ValueError:
        raise ValueError(f"{row['InstanceType']} in {row['AvailabilityZone']}: {key} {row[key]!r} is not a number") \
            from None


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
    out.setdefault("prices", {}).setdefault(region, {})["on-demand"] = {"as_of": today.isoformat(),
                                                                         "source": ON_DEMAND_SOURCE}
    _replace_spot(out, region, spot, today.isoformat(), SPOT_SOURCE)
    return _dated(out)


def refresh_spot_from_catalog(data: dict[str, Any], region: str, catalog: SpotCatalog) -> RefreshResult:
    """The catalogue ``data`` with ``region``'s spot prices taken from a spot catalogue file (its source and
    date recorded); on-demand prices, hardware and everything else are left as they are."""
    types = {**data["instances"], **(data.get("cpu_instances") or {})}
    on_demand = {name: price for name, i in types.items() if (price := (i.get("usd_per_hour") or {}).get(region))}
    spot, report = spot_from_catalog_rows(catalog.rows, region, types, on_demand)
    return RefreshResult(compute_refreshed_spot(data, region, spot, catalog.as_of, catalog.source), tuple(report))


def compute_refreshed_spot(data: dict[str, Any], region: str, spot: dict[str, float], as_of: str,
                           source: str) -> dict[str, Any]:
    """Replace one region's spot prices (a type missing from ``spot`` loses its figure: unknown, not stale) and
    date them, in a copy of ``data``: as ``compute_refreshed_data`` does, without touching on-demand."""
    out = copy.deepcopy(data)
    _replace_spot(out, region, spot, as_of, source)
    return _dated(out)


def _replace_spot(out: dict[str, Any], region: str, spot: dict[str, float] | None, as_of: str, source: str) -> None:
    """The region's spot figures and their dated source (a fetched or filed price is no estimate: no mark)."""
    for name, instance in [*out["instances"].items(), *(out.get("cpu_instances") or {}).items()]:
        _set_price(instance, "spot_usd_per_hour", region, None if spot is None else spot.get(name))
    sources = out.setdefault("prices", {}).setdefault(region, {})
    if spot is not None:
        sources["spot"] = {"as_of": as_of, "source": source}
    else:
        sources.pop("spot", None)


def _dated(out: dict[str, Any]) -> dict[str, Any]:
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
