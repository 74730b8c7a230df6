"""`prices refresh` against botocore Stubbers: realistic Pricing API and EC2 spot responses, offline."""

from __future__ import annotations

import argparse
import json
from datetime import datetime, timezone
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from modelfleet.cli import main
from modelfleet.commands import prices as prices_command
from modelfleet.commands.price_refresh import (
    EBS_SOURCE,
    ON_DEMAND_SOURCE,
    PriceRefreshError,
    fetch_spot,
    is_regional_zone,
    parse_on_demand_prices,
    read_spot_catalog,
    refresh_prices,
    refresh_spot_from_catalog,
    spot_from_catalog_rows,
)
from modelfleet.plan.hardware.instances import catalogue_from_data, load_instance_catalogue
from tests.conftest import ROOT

NOW = datetime(2026, 8, 1, 9, 30, tzinfo=timezone.utc)
REGION = "eu-west-1"
TYPES = ("c7i.xlarge", "g6.xlarge", "g6e.12xlarge", "p5.48xlarge")
CPU_TYPE = "c7i.xlarge"  # a KIND_CPU node type: priced (on-demand and spot) and checked like the GPU types
SYSTEM_TYPE = "m7i.large"  # a created cluster's system nodes: on-demand only, never asked for spot
SAPPHIRE_RAPIDS = "Intel Xeon Scalable (Sapphire Rapids)"


def shipped_subset() -> dict:
    data = yaml.safe_load((ROOT / "modelfleet/data/instances.yaml").read_text())
    data["instances"] = {k: v for k, v in data["instances"].items() if k in TYPES}
    data["cpu_instances"] = {CPU_TYPE: data["cpu_instances"][CPU_TYPE]}
    types = data["system_instances"]["types"]
    data["system_instances"]["types"] = {SYSTEM_TYPE: types[SYSTEM_TYPE]}
    return data


# What the Pricing API lists for each type: vcpu, memory, gpu and gpuMemory (the instance's total, nominal).
HARDWARE = {CPU_TYPE: ("4", "8 GiB", "", ""), "g6.xlarge": ("4", "16 GiB", "1", "24 GB"), "g6e.12xlarge": ("48", "384 GiB", "4", "192 GB"),
            "p5.48xlarge": ("192", "2048 GiB", "8", "640 GB"), SYSTEM_TYPE: ("2", "8 GiB", "", "")}


def product(instance_type: str, usd: str, sku: str, reserved_hourly: str = "0.9120000000",
            hardware: tuple[str, str, str, str] | None = None, processor: str = "AMD EPYC") -> str:
    """One PriceList entry as AWS sends it: a JSON *string* with product attributes and terms."""
    vcpu, memory, gpu, gpu_memory = hardware or HARDWARE[instance_type]
    return json.dumps({
        "product": {"productFamily": "Compute Instance", "sku": sku, "attributes": {
            "instanceType": instance_type, "regionCode": REGION, "location": "EU (Ireland)",
            "locationType": "AWS Region", "operatingSystem": "Linux", "tenancy": "Shared", "preInstalledSw": "NA",
            "capacitystatus": "Used", "licenseModel": "No License required", "operation": "RunInstances",
            "instanceFamily": "GPU instance", "servicecode": "AmazonEC2", "usagetype": f"EU-BoxUsage:{instance_type}",
            "vcpu": vcpu, "memory": memory, "gpu": gpu, "gpuMemory": gpu_memory, "physicalProcessor": processor,
            "currentGeneration": "Yes", "processorArchitecture": "64-bit", "marketoption": "OnDemand"}},
        "serviceCode": "AmazonEC2",
        "terms": {
            "OnDemand": {f"{sku}.JRTCKXETXF": {
                "offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": "2026-07-01T00:00:00Z", "termAttributes": {},
                "priceDimensions": {f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                    "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7", "unit": "Hrs", "beginRange": "0", "endRange": "Inf",
                    "appliesTo": [], "pricePerUnit": {"USD": usd},
                    "description": f"${float(usd):.4f} per On Demand Linux {instance_type} Instance Hour"}}}},
            "Reserved": {f"{sku}.4NA7Y494T4": {
                "offerTermCode": "4NA7Y494T4", "sku": sku, "effectiveDate": "2026-07-01T00:00:00Z",
                "termAttributes": {"LeaseContractLength": "1yr", "OfferingClass": "standard",
                                   "PurchaseOption": "No Upfront"},
                "priceDimensions": {f"{sku}.4NA7Y494T4.6YS6EN2CT7": {
                    "rateCode": f"{sku}.4NA7Y494T4.6YS6EN2CT7", "unit": "Hrs", "beginRange": "0", "endRange": "Inf",
                    "appliesTo": [], "pricePerUnit": {"USD": reserved_hourly},
                    "description": "Linux/UNIX (Amazon VPC), reserved instance applied"}}}}},
        "version": "20260715123456", "publicationDate": "2026-07-15T12:34:56Z"})


def filters(instance_type: str) -> list[dict]:
    return [{"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in (
        ("instanceType", instance_type), ("regionCode", REGION), ("locationType", "AWS Region"),
        ("operatingSystem", "Linux"), ("tenancy", "Shared"),
        ("preInstalledSw", "NA"), ("capacitystatus", "Used"), ("licenseModel", "No License required"),
        ("operation", "RunInstances"))]


def params(instance_type: str, token: str | None = None) -> dict:
    out = {"ServiceCode": "AmazonEC2", "Filters": filters(instance_type), "FormatVersion": "aws_v1", "MaxResults": 100}
    return {**out, "NextToken": token} if token else out


def spot(instance_type: str, zone: str, usd: str, stamp: datetime) -> dict:
    # the fields every botocore release validates (AvailabilityZoneId is newer than the one checkov pins)
    return {"AvailabilityZone": zone, "InstanceType": instance_type,
            "ProductDescription": "Linux/UNIX", "SpotPrice": usd, "Timestamp": stamp}


def clients():
    creds = {"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret"}
    pricing = boto3.client("pricing", region_name="us-east-1", **creds)
    ec2 = boto3.client("ec2", region_name=REGION, **creds)
    return pricing, Stubber(pricing), ec2, Stubber(ec2)


def stub_pricing(stub: Stubber, processor: str = SAPPHIRE_RAPIDS) -> None:
    # sorted order (the CPU type first); g6.xlarge arrives over two pages, p5.48xlarge is not sold in the region
    stub_cpu(stub, processor)
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "NextToken": "page-2",
                                       "PriceList": [product("g6.xlarge", "0.8896000000", "G6XLEU")]},
                      params("g6.xlarge"))
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": []}, params("g6.xlarge", "page-2"))
    stub.add_response("get_products", {"FormatVersion": "aws_v1",
                                       "PriceList": [product("g6e.12xlarge", "11.6090000000", "G6E12EU")]},
                      params("g6e.12xlarge"))
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": []}, params("p5.48xlarge"))
    stub_system(stub)


def stub_cpu(stub: Stubber, processor: str = SAPPHIRE_RAPIDS) -> None:
    """The CPU type, asked first (the types are asked in name order)."""
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [
        product(CPU_TYPE, "0.2016000000", "C7IXLEU", processor=processor)]}, params(CPU_TYPE))


def stub_system(stub: Stubber, hardware: tuple[str, str, str, str] | None = None,
                gp3: list[str] | None = None) -> None:
    """The system type, asked after the GPU types, then the EBS gp3 prices (``gp3``: that PriceList)."""
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [
        product(SYSTEM_TYPE, "0.1128000000", "M7ILEU", hardware=hardware)]}, params(SYSTEM_TYPE))
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": GP3 if gp3 is None else gp3},
                      GP3_PARAMS)


def volume_product(family: str, usagetype: str, sku: str, dimensions: list[tuple[str, str, str]]) -> str:
    """A gp3 PriceList entry: ``dimensions`` are (unit, USD, beginRange) of its OnDemand term."""
    return json.dumps({
        "product": {"productFamily": family, "sku": sku, "attributes": {
            "servicecode": "AmazonEC2", "location": "EU (Ireland)", "locationType": "AWS Region",
            "regionCode": REGION, "volumeApiName": "gp3", "volumeType": "General Purpose", "storageMedia": "SSD-backed",
            "usagetype": f"EU-{usagetype}", "operation": ""}},
        "serviceCode": "AmazonEC2",
        "terms": {"OnDemand": {f"{sku}.JRTCKXETXF": {
            "offerTermCode": "JRTCKXETXF", "sku": sku, "effectiveDate": "2026-07-01T00:00:00Z", "termAttributes": {},
            "priceDimensions": {f"{sku}.JRTCKXETXF.{i}": {
                "rateCode": f"{sku}.JRTCKXETXF.{i}", "unit": unit, "beginRange": begin, "endRange": "Inf",
                "appliesTo": [], "pricePerUnit": {"USD": usd}, "description": f"${usd} per {unit} of gp3"}
                for i, (unit, usd, begin) in enumerate(dimensions)}}}},
        "version": "20260715123456", "publicationDate": "2026-07-15T12:34:56Z"})


# eu-west-1's gp3 prices as the Pricing API lists them: storage per GB-month, IOPS above the included 3,000
# (the included tier at 0), throughput per GiB/s-month (0.044 USD per MiB/s x 1,024).
GP3 = [volume_product("Storage", "EBS:VolumeUsage.gp3", "GP3EU", [("GB-Mo", "0.0880000000", "0")]),
       volume_product("System Operation", "EBS:VolumeP-IOPS.gp3", "GP3IOPSEU",
                      [("IOPS-Mo", "0.0000000000", "0"), ("IOPS-Mo", "0.0055000000", "3000")]),
       volume_product("Provisioned Throughput", "EBS:VolumeP-Throughput.gp3", "GP3TPEU",
                      [("GiBps-mo", "45.0560000000", "0")])]
GP3_PARAMS = {"ServiceCode": "AmazonEC2", "FormatVersion": "aws_v1", "MaxResults": 100, "Filters": [
    {"Type": "TERM_MATCH", "Field": f, "Value": v} for f, v in (
        ("volumeApiName", "gp3"), ("regionCode", REGION), ("locationType", "AWS Region"))]}


def spot_params(token: str | None = None) -> dict:
    out = {"InstanceTypes": sorted(TYPES), "ProductDescriptions": ["Linux/UNIX"], "StartTime": NOW}
    return {**out, "NextToken": token} if token else out


def stub_spot(stub: Stubber) -> None:
    earlier = datetime(2026, 8, 1, 6, 0, tzinfo=timezone.utc)
    later = datetime(2026, 8, 1, 9, 0, tzinfo=timezone.utc)
    stub.add_response("describe_spot_price_history", {"NextToken": "more", "SpotPriceHistory": [
        spot("g6.xlarge", "eu-west-1a", "0.3112", later), spot("g6.xlarge", "eu-west-1b", "0.2987", later),
        spot("g6.xlarge", "eu-west-1c", "0.4500", earlier)]}, spot_params())
    stub.add_response("describe_spot_price_history", {"NextToken": "", "SpotPriceHistory": [
        spot("g6.xlarge", "eu-west-1c", "0.3050", later),  # newer than the 0.45 above: that one is stale
        spot("g6e.12xlarge", "eu-west-1a", "4.1203", later), spot(CPU_TYPE, "eu-west-1b", "0.0712", later)]},
        spot_params("more"))


def marked_estimated(data: dict) -> dict:
    """The table with its us-east-1 spot figures marked as estimates (as the shipped table's were before they were
    dated): a refresh of another region must keep the mark on them and put none on its own."""
    data["prices"]["us-east-1"]["spot"]["estimated"] = True
    return data


def test_refresh_rebuilds_one_regions_prices():
    pricing, pricing_stub, ec2, ec2_stub = clients()
    stub_pricing(pricing_stub)
    stub_spot(ec2_stub)
    with pricing_stub, ec2_stub:
        result = refresh_prices(marked_estimated(shipped_subset()), REGION, pricing, ec2, NOW)
        pricing_stub.assert_no_pending_responses()
        ec2_stub.assert_no_pending_responses()
    inst = result.data["instances"]
    assert inst["g6.xlarge"]["usd_per_hour"] == {REGION: 0.8896, "us-east-1": 0.8048}  # us-east-1 kept
    # latest per zone, dearest zone; us-east-1's (the starting table's) kept
    assert inst["g6.xlarge"]["spot_usd_per_hour"] == {REGION: 0.3112, "us-east-1": 0.4011}
    assert inst["g6e.12xlarge"]["usd_per_hour"][REGION] == 11.609  # the Reserved 0.912/h is not on-demand
    assert inst["g6e.12xlarge"]["spot_usd_per_hour"] == {REGION: 4.1203, "us-east-1": 6.015}
    assert REGION not in inst["p5.48xlarge"]["usd_per_hour"] and REGION not in inst["p5.48xlarge"]["spot_usd_per_hour"]
    assert result.data["prices"][REGION]["on-demand"]["as_of"] == "2026-08-01"
    assert result.data["prices"][REGION]["spot"]["as_of"] == "2026-08-01"
    assert result.data["prices"]["us-east-1"]["on-demand"]["as_of"] == "2026-07-20"
    # fetched spot prices are dated, not estimates; us-east-1's marked estimates keep their mark
    assert "estimated" not in result.data["prices"][REGION]["spot"]
    assert result.data["prices"]["us-east-1"]["spot"]["estimated"] is True
    assert catalogue_from_data(result.data).instances["g6.xlarge"].spot_estimated == {"us-east-1"}
    assert result.report == ("p5.48xlarge: no on-demand price in eu-west-1 (not offered there?); left unknown",
                             "p5.48xlarge: no spot price in eu-west-1; its spot cost is unknown unless a stack "
                             "states modelfleet:cost.spotPriceRatio")
    assert result.data["instances"]["g6.xlarge"]["vcpu"] == 4  # AWS agrees with the table: nothing to report
    cpu = result.data["cpu_instances"][CPU_TYPE]
    assert cpu["usd_per_hour"] == {REGION: 0.2016, "us-east-1": 0.1785}  # a CPU type: priced like the GPU ones
    assert cpu["spot_usd_per_hour"] == {REGION: 0.0712, "us-east-1": 0.0785}
    system = result.data["system_instances"]
    assert system["types"][SYSTEM_TYPE]["usd_per_hour"] == {REGION: 0.1128, "us-east-1": 0.1008}
    assert "spot_usd_per_hour" not in system["types"][SYSTEM_TYPE]  # system nodes are never spot
    assert system["prices"][REGION] == {"as_of": "2026-08-01", "source": ON_DEMAND_SOURCE}
    assert system["prices"]["us-east-1"]["as_of"] == "2026-01-19"  # the other region keeps its own date
    ebs = result.data["ebs_gp3"]
    assert ebs["usd_per_gib_month"] == {REGION: 0.088, "us-east-1": 0.08}
    assert ebs["usd_per_iops_month"] == {REGION: 0.0055, "us-east-1": 0.005}  # the free included tier skipped
    assert ebs["usd_per_mibps_month"] == {REGION: 0.044, "us-east-1": 0.04}  # 45.056 per GiB/s / 1,024
    assert ebs["prices"][REGION] == {"as_of": "2026-08-01", "source": EBS_SOURCE}
    assert ebs["prices"]["us-east-1"]["as_of"] == "2020-12-01"


@pytest.mark.parametrize("gp3, why", [
    ([], "no usd_per_gib_month; no usd_per_iops_month; no usd_per_mibps_month"),
    (GP3[:2], "no usd_per_mibps_month"),
    (GP3 + [volume_product("Storage", "EBS:VolumeUsage.gp3", "GP3EU2", [("GB-Mo", "0.0960000000", "0")])],
     "several usd_per_gib_month (0.088, 0.096)"),
])
def test_gp3_prices_missing_or_ambiguous_are_left_unknown(gp3, why):
    """The region's shipped gp3 prices are removed, not kept stale, and the preview then says unknown."""
    pricing, stub, _, _ = clients()
    stub_cpu(stub)
    for name in ("g6.xlarge", "g6e.12xlarge", "p5.48xlarge"):
        stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": []}, params(name))
    stub_system(stub, gp3=gp3)
    data = shipped_subset()
    data["ebs_gp3"]["usd_per_gib_month"][REGION] = 0.5  # an old price for the region: not to be kept
    with stub:
        result = refresh_prices(data, REGION, pricing, None, NOW)
    assert f"EBS gp3 in {REGION}: {why} from the Pricing API; left unknown (node volumes, and so the totals, " \
           "are unpriced there)" in result.report
    assert all(REGION not in result.data["ebs_gp3"].get(key, {}) for key in (
        "usd_per_gib_month", "usd_per_iops_month", "usd_per_mibps_month", "prices"))
    assert result.data["ebs_gp3"]["usd_per_gib_month"]["us-east-1"] == 0.08


def test_gp3_price_in_an_unknown_unit_is_reported_not_converted():
    pricing, stub, _, _ = clients()
    stub_cpu(stub)
    for name in ("g6.xlarge", "g6e.12xlarge", "p5.48xlarge"):
        stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": []}, params(name))
    odd = volume_product("Provisioned Throughput", "EBS:VolumeP-Throughput.gp3", "X", [("TBps-yr", "9.0", "0")])
    stub_system(stub, gp3=GP3[:2] + [odd])
    with stub:
        result = refresh_prices(shipped_subset(), REGION, pricing, None, NOW)
    assert f"EBS gp3 in {REGION}: a price in an unknown unit 'TBps-yr' was ignored" in result.report
    assert REGION not in result.data["ebs_gp3"]["usd_per_mibps_month"]


def test_several_on_demand_prices_are_not_guessed_between():
    pricing, stub, _, _ = clients()
    two = [product("g6.xlarge", "0.8896000000", "A"), product("g6.xlarge", "0.9100000000", "B")]
    stub_cpu(stub)
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": two}, params("g6.xlarge"))
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [product(
        "g6e.12xlarge", "11.6090000000", "C"), product("g6e.12xlarge", "11.6090000000", "D")]}, params("g6e.12xlarge"))
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": []}, params("p5.48xlarge"))
    stub_system(stub)
    with stub:
        result = refresh_prices(shipped_subset(), REGION, pricing, None, NOW)
    assert REGION not in result.data["instances"]["g6.xlarge"]["usd_per_hour"]
    assert result.data["instances"]["g6e.12xlarge"]["usd_per_hour"][REGION] == 11.609  # duplicates agree
    assert "g6.xlarge: several on-demand prices in eu-west-1 (0.8896, 0.91); left unknown" in result.report
    assert "spot" not in result.data["prices"][REGION]


def test_spot_failure_keeps_on_demand_and_says_so():
    pricing, pricing_stub, ec2, ec2_stub = clients()
    stub_pricing(pricing_stub)
    ec2_stub.add_client_error("describe_spot_price_history", service_error_code="UnauthorizedOperation",
                              service_message="You are not authorized to perform this operation.", http_status_code=403)
    with pricing_stub, ec2_stub:
        result = refresh_prices(shipped_subset(), REGION, pricing, ec2, NOW)
    assert result.data["instances"]["g6.xlarge"]["usd_per_hour"][REGION] == 0.8896
    assert all(REGION not in i.get("spot_usd_per_hour", {}) for i in result.data["instances"].values())
    assert result.report[-1].startswith("spot prices not refreshed (ClientError: An error occurred "
                                        "(UnauthorizedOperation)")


def test_parse_ignores_reserved_and_upfront_terms():
    assert parse_on_demand_prices([product("g6.xlarge", "0.8896000000", "X", reserved_hourly="0.5")]) == {0.8896}


def test_hardware_is_checked_against_the_pricing_api():
    """vCPU, RAM and GPU counts are taken from AWS when they differ (and said); GPU memory is only checked."""
    pricing, stub, _, _ = clients()
    wrong = product("g6.xlarge", "0.8896000000", "G6", hardware=("8", "32 GiB", "1", "48 GB"))
    stub_cpu(stub)
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [wrong]}, params("g6.xlarge"))
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [product(
        "g6e.12xlarge", "11.6090000000", "G6E")]}, params("g6e.12xlarge"))
    stub.add_response("get_products", {"FormatVersion": "aws_v1", "PriceList": [product(
        "p5.48xlarge", "63.2960000000", "P5", hardware=("192", "2,048 GiB", "8", "640 GB"))]}, params("p5.48xlarge"))
    stub_system(stub, hardware=("2", "16 GiB", "", ""))  # RAM differs: taken from AWS; no GPU to check
    with stub:
        result = refresh_prices(shipped_subset(), REGION, pricing, None, NOW)
    g6 = result.data["instances"]["g6.xlarge"]
    assert (g6["vcpu"], g6["ram_gib"], g6["gpus"]) == (8, 32.0, 1)
    assert result.report == (
        "g6.xlarge: vcpu 4 in the table, 8 from the Pricing API (vcpu: '8'); taken from AWS",
        "g6.xlarge: ram_gib 16 in the table, 32.0 from the Pricing API (memory: '32 GiB'); taken from AWS",
        # 22.05 GiB usable of a 48 GB GPU is not a CUDA reserve: the table's GPU model would be wrong
        "g6.xlarge: the Pricing API lists 48 GB of GPU memory (48 GB per GPU) but the table's l4 has 22.05 GiB usable "
        "per GPU: check which GPU the table names for it (left as it is)",
        "m7i.large: ram_gib 8 in the table, 16.0 from the Pricing API (memory: '16 GiB'); taken from AWS")
    assert result.data["system_instances"]["types"][SYSTEM_TYPE]["ram_gib"] == 16.0
    assert result.data["gpus"]["l4"]["memory_gib"] == 22.05
    assert result.data["instances"]["p5.48xlarge"]["ram_gib"] == 2048  # "2,048 GiB" read as 2048: no change


class _Broken:
    """An EC2 client with a bug in it (not an AWS error): it must not be mistaken for "AWS said no"."""

    def describe_spot_price_history(self, **_):
        raise TypeError("a bug, not AWS")


def test_only_aws_errors_are_reported_as_aws_errors():
    pricing, stub, _, _ = clients()
    stub_pricing(stub)
    with stub, pytest.raises(TypeError, match="a bug, not AWS"):
        refresh_prices(shipped_subset(), REGION, pricing, _Broken(), NOW)


def test_a_pricing_api_error_is_one_line_and_writes_nothing(tmp_path, capsys):
    pricing, stub, _, _ = clients()
    stub.add_client_error("get_products", service_error_code="AccessDeniedException", http_status_code=400,
                          service_message="User is not authorized to perform: pricing:GetProducts")
    args = argparse.Namespace(project=str(tmp_path), region=REGION, prices=None, out=str(tmp_path / "p.yaml"),
                              no_spot=True)
    denied = r"prices refresh: AccessDeniedException: An error occurred \(AccessDeniedException\)"
    with stub, pytest.raises(PriceRefreshError, match=denied):
        prices_command.run(args, clients=(pricing, None), now=NOW)
    assert not (tmp_path / "p.yaml").exists()


def test_refresh_command_writes_a_table_the_cost_preview_uses(tmp_path, capsys):
    pricing, pricing_stub, ec2, ec2_stub = clients()
    stub_pricing(pricing_stub)
    stub_spot(ec2_stub)
    start = tmp_path / "start.yaml"
    start.write_text(yaml.safe_dump(shipped_subset()))
    out = tmp_path / "prices.yaml"
    args = argparse.Namespace(project=str(tmp_path), region=REGION, prices=str(start), out=str(out), no_spot=False)
    with pricing_stub, ec2_stub:
        assert prices_command.run(args, clients=(pricing, ec2), now=NOW) == 0
    assert "note: p5.48xlarge: no on-demand price in eu-west-1" in capsys.readouterr().out
    assert out.read_text().startswith("# Written by `modelfleet prices refresh --region eu-west-1`")
    table = load_instance_catalogue(str(out))
    assert table.instances["g6.xlarge"].spot_price(REGION) == 0.3112
    _project_in(tmp_path, REGION)
    assert main(["--project", str(tmp_path), "cost", "--stack", "dev", "--prices", str(out), "--format", "json"]) == 0
    dev = json.loads(capsys.readouterr().out)["environments"]["dev"]
    group = dev["node_groups"][0]
    assert group["instance_type"] == "g6.xlarge" and group["price_basis"] == "spot (dated table)"
    volume = 17.6  # 200 GiB x 0.088 at eu-west-1's refreshed gp3 price, nothing provisioned above the included
    assert group["volume"] == "200 GiB gp3 at 3000 IOPS, 125 MiB/s" and group["volume_usd_per_node_month"] == volume  # cents
    assert group["monthly_usd"]["desired"] == round(group["nodes"][1] * (0.3112 * 730 + volume), 2)
    assert table.system_instances[SYSTEM_TYPE].price(REGION) == 0.1128
    assert table.system_price_sources[REGION].as_of == "2026-08-01"
    assert "spot eu-west-1: EC2 describe_spot_price_history" in dev["price_basis"][1]


def _project_in(root: Path, region: str) -> None:
    """A one-model project in ``region`` on spot g6, so the refreshed table decides its cost."""
    (root / "stacks").mkdir()
    (root / "stacks" / "Pulumi.dev.yaml").write_text(
        f"config:\n  aws:region: {region}\n  modelfleet:capacityType: spot\n  modelfleet:instanceFamilies: [g6]\n"
        "  modelfleet:replicas: {singleReplica: true}\n")
    (root / "models.yaml").write_text(
        "models:\n  - name: scorer\n    type: tabular\n    framework: onnx\n    artifact: s3://bucket/scorer\n"
        "    size: {memory_gib: 0.5}\n    inputs: [{name: x, dtype: fp32, dims: [8]}]\n"
        "    outputs: [{name: y, dtype: fp32, dims: [1]}]\n    sla: {p99_latency_ms: 50, peak_rps: 100}\n"
        "    profile: {rps_per_instance: 5000, compute_ms: 2}\n")


def test_no_credentials_is_one_line_not_a_traceback(monkeypatch, tmp_path):
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    with pytest.raises(PriceRefreshError, match="no AWS credentials found"):
        prices_command.make_clients(REGION, spot=True)
    assert main(["--project", str(tmp_path), "prices", "refresh", "--region", REGION, "--out",
                 str(tmp_path / "p.yaml")]) == 2
    assert not (tmp_path / "p.yaml").exists()


def test_a_cpu_type_whose_processor_is_not_the_tables_is_reported():
    """Measured CPU figures carry over between families of one processor: a table naming the wrong processor
    would let them carry over to the wrong families, so the Pricing API's physicalProcessor is checked."""
    pricing, pricing_stub, _, _ = clients()
    stub_pricing(pricing_stub, processor="Intel Xeon 8375C (Ice Lake)")
    with pricing_stub:
        result = refresh_prices(shipped_subset(), REGION, pricing, None, NOW)
    assert any(line.startswith(f"{CPU_TYPE}: the Pricing API lists physicalProcessor 'Intel Xeon 8375C (Ice Lake)'")
               and "sapphire-rapids (Sapphire Rapids)" in line for line in result.report), result.report
    assert result.data["cpu_instances"][CPU_TYPE]["cpu"] == "sapphire-rapids"  # reported, never rewritten


# ------------------------------------------------------------------------------------------------ spot from a file
def test_only_a_regions_own_zones_are_regional():
    """Names and IDs of a region's availability zones, against Local and Wavelength Zones' (a node group's subnets
    are in the region's own zones: a Local Zone's spot price is not what its nodes pay)."""
    for zone in ("us-east-1a", "eu-west-1c", "ap-northeast-1d", "us-gov-west-1a", "use1-az4", "apne1-az1", "usw2-az4"):
        assert is_regional_zone(zone), zone
    for zone in ("us-east-1-atl-2a", "use1-atl2-az1", "us-west-2-lax-1a", "usw2-lax1-az1", "us-east-1-wl1-bos-wlz-1",
                 "use1-wl1-bos-wlz1", ""):
        assert not is_regional_zone(zone), zone


def test_live_spot_skips_a_local_zone():
    creds = {"aws_access_key_id": "AKIDEXAMPLE", "aws_secret_access_key": "secret"}
    ec2 = boto3.client("ec2", region_name="us-east-1", **creds)
    stub = Stubber(ec2)
    stub.add_response("describe_spot_price_history", {"SpotPriceHistory": [
        spot("c6i.16xlarge", "us-east-1a", "1.1486", NOW), spot("c6i.16xlarge", "us-east-1b", "0.8512", NOW),
        spot("c6i.16xlarge", "us-east-1-atl-2a", "3.4000", NOW)]},  # above the 2.72 on-demand: not a node group's
        {"InstanceTypes": ["c6i.16xlarge"], "ProductDescriptions": ["Linux/UNIX"], "StartTime": NOW})
    with stub:
        assert fetch_spot(ec2, ["c6i.16xlarge"], NOW) == {"c6i.16xlarge": 1.1486}


def row(instance_type: str, zone: str, spot_usd: str, region: str = "us-east-1", price: str = "1.006") -> dict:
    """One row as SkyPilot's AWS catalogue has it (the columns spot_from_catalog_rows reads, and one it ignores)."""
    return {"InstanceType": instance_type, "Price": price, "SpotPrice": spot_usd, "Region": region,
            "AvailabilityZone": zone, "Arch": "x86_64"}


def test_spot_from_catalog_rows_takes_the_dearest_regional_zone():
    rows = [row("g5.xlarge", "use1-az1", "0.450700"), row("g5.xlarge", "use1-az2", "0.424600"),
            row("g5.xlarge", "use1-az4", "0.436000"),
            row("g5.xlarge", "usw2-az1", "0.612000", region="us-west-2", price="1.006"),  # another region: ignored
            row("g5.xlarge", "use1-atl2-az1", "0.990000"),  # a Local Zone: skipped, and said so
            row("p5.4xlarge", "use1-az1", "", price="6.88"), row("p5.4xlarge", "use1-az2", "", price="6.88"),  # none
            row("g6.xlarge", "use1-az1", "0.401100", price="0.8048"),
            row("m5.large", "use1-az1", "0.030000", price="0.096")]  # not a type asked for: ignored
    types = ["g5.xlarge", "g6.xlarge", "p5.4xlarge", "p4d.24xlarge"]
    prices, report = spot_from_catalog_rows(rows, "us-east-1", types,
                                            on_demand={"g5.xlarge": 1.006, "g6.xlarge": 0.8048, "p5.4xlarge": 6.88})
    assert prices == {"g5.xlarge": 0.4507, "g6.xlarge": 0.4011}
    assert report == [
        ("use1-atl2-az1: not one of us-east-1's own availability zones (a Local or Wavelength Zone); its spot prices "
         "skipped (1 type(s))"),
        ("p4d.24xlarge: no spot price in us-east-1; its spot cost is unknown unless a stack states "
         "modelfleet:cost.spotPriceRatio"),  # no row at all
        ("p5.4xlarge: no spot price in us-east-1; its spot cost is unknown unless a stack states "
         "modelfleet:cost.spotPriceRatio")]  # rows without a spot price
    # the file's on-demand price is checked against the table's, never taken
    _, report = spot_from_catalog_rows(rows, "us-east-1", ["g5.xlarge"], on_demand={"g5.xlarge": 1.1})
    assert report[-1] == "g5.xlarge: on-demand 1.006 USD/h in the file, 1.1 in the table (left as it is)"
    assert spot_from_catalog_rows(rows, "us-west-2", ["g5.xlarge"])[0] == {"g5.xlarge": 0.612}


CATALOG = ("# source: a test catalogue (per zone, dearest zone)\n# as_of: 2026-11-28\n# any other comment\n"
           "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,"
           "AvailabilityZone,Arch\n"
           "g6.xlarge,L4,1.0,4.0,16.0,\"{'Gpus': [{'Name': 'L4', 'Count': 1}]}\",0.8048,0.401100,us-east-1,use1-az1,x86_64\n"
           "g6.xlarge,L4,1.0,4.0,16.0,\"{'Gpus': [{'Name': 'L4', 'Count': 1}]}\",0.8048,0.352200,us-east-1,use1-az2,x86_64\n"
           "c7i.xlarge,,,4.0,8.0,,0.1785,0.078500,us-east-1,use1-az4,x86_64\n")


def test_a_spot_catalogue_file_replaces_only_the_regions_spot_prices_and_dates_them():
    catalog = read_spot_catalog(CATALOG, "spot.csv")
    assert (catalog.source, catalog.as_of, len(catalog.rows)) == ("a test catalogue (per zone, dearest zone)",
                                                                  "2026-11-28", 3)
    start = marked_estimated(shipped_subset())
    result = refresh_spot_from_catalog(start, "us-east-1", catalog)
    inst = result.data["instances"]
    assert inst["g6.xlarge"]["spot_usd_per_hour"] == {"us-east-1": 0.4011}
    assert result.data["cpu_instances"][CPU_TYPE]["spot_usd_per_hour"] == {"us-east-1": 0.0785}
    for name in ("g6e.12xlarge", "p5.48xlarge"):  # no row: unknown, not kept stale
        assert "spot_usd_per_hour" not in inst[name], name
    assert [i["usd_per_hour"] for i in inst.values()] == [i["usd_per_hour"] for i in start["instances"].values()]
    assert result.data["prices"]["us-east-1"]["spot"] == {"as_of": "2026-11-28",  # dated, the mark gone
                                                           "source": "a test catalogue (per zone, dearest zone)"}
    assert result.data["prices"]["us-east-1"]["on-demand"] == start["prices"]["us-east-1"]["on-demand"]
    assert result.data["ebs_gp3"] == start["ebs_gp3"] and result.data["system_instances"] == start["system_instances"]
    assert result.data["as_of"] == "2026-11-28"
    assert catalogue_from_data(result.data).instances["g6.xlarge"].spot_estimated == frozenset()
    assert result.report == tuple(f"{n}: no spot price in us-east-1; its spot cost is unknown unless a stack states "
                                  "modelfleet:cost.spotPriceRatio" for n in ("g6e.12xlarge", "p5.48xlarge"))


@pytest.mark.parametrize("text, why", [
    (CATALOG.replace("# as_of: 2026-11-28\n", ""), "no `# as_of:` line"),
    (CATALOG.replace("# source: a test catalogue (per zone, dearest zone)\n", ""), "no `# source:` line"),
    (CATALOG.replace("2026-11-28", "last week"), "`# as_of: last week` is not a date"),
    (CATALOG.replace(",SpotPrice,", ",Spot,"), "no column SpotPrice in the header"),
])
def test_a_spot_catalogue_without_its_provenance_or_columns_is_refused(text, why):
    with pytest.raises(PriceRefreshError, match=why):
        read_spot_catalog(text, "spot.csv")


def test_the_shipped_spot_prices_are_what_their_source_file_gives():
    """instances.yaml's us-east-1 spot figures and their source are what `prices refresh --spot-from-csv` makes of
    the shipped extract of SkyPilot's catalogue (modelfleet/data/sources/spot-us-east-1-skypilot.csv)."""
    path = ROOT / "modelfleet" / "data" / "sources" / "spot-us-east-1-skypilot.csv"
    shipped = yaml.safe_load((ROOT / "modelfleet" / "data" / "instances.yaml").read_text())
    result = refresh_spot_from_catalog(shipped, "us-east-1", read_spot_catalog(path.read_text(), str(path)))
    for section in ("instances", "cpu_instances"):
        assert {n: i.get("spot_usd_per_hour") for n, i in shipped[section].items()} == \
            {n: i.get("spot_usd_per_hour") for n, i in result.data[section].items()}, section
    assert shipped["prices"]["us-east-1"]["spot"] == result.data["prices"]["us-east-1"]["spot"]
    assert "estimated" not in shipped["prices"]["us-east-1"]["spot"]
    # the Atlanta Local Zone skipped; p5.4xlarge has no spot price in any us-east-1 zone; on-demand prices agree
    assert result.report == (
        ("use1-atl2-az1: not one of us-east-1's own availability zones (a Local or Wavelength Zone); its spot "
         "prices skipped (20 type(s))"),
        ("p5.4xlarge: no spot price in us-east-1; its spot cost is unknown unless a stack states "
         "modelfleet:cost.spotPriceRatio"))


def test_the_spot_from_csv_command_writes_a_table_without_asking_aws(tmp_path, capsys):
    source = tmp_path / "spot.csv"
    source.write_text(CATALOG)
    start = tmp_path / "start.yaml"
    start.write_text(yaml.safe_dump(shipped_subset()))
    out = tmp_path / "prices.yaml"
    assert main(["--project", str(tmp_path), "prices", "refresh", "--region", "us-east-1", "--prices", str(start),
                 "--out", str(out), "--spot-from-csv", str(source)]) == 0
    printed = capsys.readouterr().out
    assert "note: g6e.12xlarge: no spot price in us-east-1" in printed
    assert f"wrote {out}: 3 of 3 GPU instance types priced on demand, 2 of 4 instance types on spot" in printed
    table = load_instance_catalogue(str(out))
    assert table.instances["g6.xlarge"].spot_price("us-east-1") == 0.4011
    assert table.price_sources["us-east-1"]["spot"].source == "a test catalogue (per zone, dearest zone)"
    source.write_text(CATALOG.replace("0.352200", "n/a"))
    assert main(["--project", str(tmp_path), "prices", "refresh", "--region", "us-east-1", "--prices", str(start),
                 "--out", str(tmp_path / "other.yaml"), "--spot-from-csv", str(source)]) == 2
    assert "g6.xlarge in use1-az2: SpotPrice 'n/a' is not a number" in capsys.readouterr().err
    assert not (tmp_path / "other.yaml").exists()
