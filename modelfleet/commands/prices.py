from __future__ import annotations

import argparse
import os
from datetime import datetime, timezone
from typing import Any

import yaml

from ..errors import Issue
from ..plan.hardware.instances import catalogue_from_data
from ..render.outputs import write_file
from .price_refresh import (
    PRICING_REGION,
    PriceRefreshError,
    RefreshResult,
    missing_credentials_error,
    read_spot_catalog,
    refresh_prices,
    refresh_spot_from_catalog,
    render_catalogue_yaml,
)

NAME = "prices"
HELP = "the dated instance price table: `prices refresh --region R` rebuilds one region's prices from AWS"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    refresh = sub.add_parser("refresh", help="fetch on-demand (Pricing API) and spot (EC2) prices for a region")
    refresh.add_argument("--region", required=True, help="AWS region, e.g. eu-west-1")
    refresh.add_argument("--prices", default=None, help="table to start from (default: the shipped one)")
    refresh.add_argument("--out", default=None, help="file to write (default: <project>/prices.yaml)")
    refresh.add_argument("--no-spot", action="store_true", help="on-demand only (no ec2:DescribeSpotPriceHistory)")
    refresh.add_argument("--spot-from-csv", metavar="FILE", default=None,
                         help="spot only, from a file of per-zone prices in SkyPilot's AWS catalogue columns with "
                              "`# source:` and `# as_of:` lines (no AWS call; on-demand left as it is)")


def run(args: argparse.Namespace, clients: tuple[Any, Any | None] | None = None, now: datetime | None = None) -> int:
    """``clients`` (pricing, ec2) and ``now`` are injected by tests; by default boto3 and the clock."""
    data = _load_data(args.prices)
    if getattr(args, "spot_from_csv", None):
        return _write(args, _spot_from_csv(data, args))
    pricing, ec2 = clients if clients is not None else make_clients(args.region, spot=not args.no_spot)
    if args.no_spot:
        ec2 = None
    from botocore.exceptions import BotoCoreError, ClientError  # installed with boto3, which made the clients

    try:
        result = refresh_prices(data, args.region, pricing, ec2, now or datetime.now(timezone.utc))
    except (ClientError, BotoCoreError) as exc:  # AWS said no (permissions, network, throttling): one line
        raise PriceRefreshError([Issue("", 0, 0, "prices refresh", f"{type(exc).__name__}: {exc}",
                                       "check the credentials' permissions and the network")]) from None
    return _write(args, result)


def _spot_from_csv(data: dict[str, Any], args: argparse.Namespace) -> RefreshResult:
    path = args.spot_from_csv
    if args.no_spot:
        raise PriceRefreshError([Issue(path, 0, 0, "prices refresh", "--spot-from-csv and --no-spot together",
                                       "give one of them")])
    try:
        with open(path, encoding="utf-8") as handle:
            catalog = read_spot_catalog(handle.read(), path)
        return refresh_spot_from_catalog(data, args.region, catalog)
    except (OSError, ValueError, KeyError) as exc:  # unreadable, a price that is no number, a row short of a column
        raise PriceRefreshError([Issue(path, 0, 0, "prices refresh --spot-from-csv", f"{type(exc).__name__}: {exc}",
                                       "give a readable CSV file of per-zone spot prices")]) from None


def _write(args: argparse.Namespace, result: RefreshResult) -> int:
    catalogue_from_data(result.data)  # the table must load as the compiler will load it
    out = args.out or os.path.join(args.project, "prices.yaml")
    write_file(out, render_catalogue_yaml(result.data, args.region).encode())
    for line in result.report:
        print(f"note: {line}")
    types = [*result.data["instances"].values(), *(result.data.get("cpu_instances") or {}).values()]
    priced = sum(1 for i in result.data["instances"].values() if args.region in i["usd_per_hour"])
    spot = sum(1 for i in types if args.region in (i.get("spot_usd_per_hour") or {}))
    print(f"wrote {out}: {priced} of {len(result.data['instances'])} GPU instance types priced on demand, {spot} of "
          f"{len(types)} instance types on spot in {args.region}; use it with --prices {out}")
    return 0


def _load_data(path: str | None) -> dict[str, Any]:
    if path is None:
        from importlib import resources
        text = resources.files("modelfleet").joinpath("data/instances.yaml").read_text(encoding="utf-8")
    else:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    return yaml.safe_load(text)


def make_clients(region: str, spot: bool) -> tuple[Any, Any | None]:
    """boto3 clients from the standard credential chain; imported here so the core never needs boto3."""
    try:
        import boto3
    except ImportError:
        raise PriceRefreshError([Issue("", 0, 0, "prices refresh", "boto3 is not installed",
                                       "pip install 'modelfleet[aws]'")]) from None
    session = boto3.session.Session()
    if session.get_credentials() is None:
        raise missing_credentials_error()
    pricing = session.client("pricing", region_name=PRICING_REGION)
    return pricing, session.client("ec2", region_name=region) if spot else None
