"""The GPU instance catalogue: hardware and dated on-demand prices, shipped as data (data/instances.yaml).

GPU types (``instances``) are what the compiler places models on. A created cluster's system nodes run on
non-GPU types, priced in a section of their own (``system_instances``): kept apart, so no family lookup,
instance choice or ``instanceFamilies`` check ever sees them, and a model can never land on one.

Loading is the only I/O here and happens at the edge (``load_instance_catalogue``); the compiler receives
the catalogue as a value, so tests can hand it any table they like.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Mapping

import yaml


@dataclass(frozen=True)
class GpuType:
    key: str
    name: str
    memory_gib: float  # usable per GPU
    fp16_tflops: float  # dense, per GPU
    memory_bandwidth_gbs: float | None = None  # None: unknown (throughput is then scaled by compute alone)
    compute_capability: float | None = None  # CUDA compute capability; None: unknown (bf16 assumed, FP8 not)


@dataclass(frozen=True)
class InstanceType:
    name: str
    family: str
    gpu: GpuType
    gpus: int
    vcpu: int
    ram_gib: float
    usd_per_hour: Mapping[str, float]  # on-demand, by region; a region missing here is "unknown"
    # Spot, by region, only where `prices refresh` fetched it; elsewhere the stack's spot assumption applies.
    spot_usd_per_hour: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def gpu_memory_gib(self) -> float:
        return self.gpu.memory_gib

    @property
    def total_gpu_memory_gib(self) -> float:
        return self.gpu.memory_gib * self.gpus

    def price(self, region: str) -> float | None:
        return self.usd_per_hour.get(region)

    def spot_price(self, region: str) -> float | None:
        return self.spot_usd_per_hour.get(region)


@dataclass(frozen=True)
class PriceSource:
    """Where one region's prices of one kind (``on-demand`` or ``spot``) came from, and when."""

    as_of: str
    source: str


@dataclass(frozen=True)
class SystemInstanceType:
    """A non-GPU type for a created cluster's system node group (modelfleet:cluster.systemInstanceType)."""

    name: str
    family: str
    vcpu: int
    ram_gib: float
    usd_per_hour: Mapping[str, float]  # on-demand, by region (system nodes are never spot); missing: unknown

    def price(self, region: str) -> float | None:
        return self.usd_per_hour.get(region)


@dataclass(frozen=True)
class InstanceCatalogue:
    as_of: str
    source: str
    instances: Mapping[str, InstanceType]
    # region -> {"on-demand" | "spot": PriceSource}; a region or kind missing here has no dated data.
    price_sources: Mapping[str, Mapping[str, PriceSource]] = field(default_factory=lambda: MappingProxyType({}))
    # EKS control plane, per cluster-hour (standard support); None when the table does not say.
    eks_usd_per_cluster_hour: float | None = None
    # Non-GPU types for system nodes only (never in ``instances``), and where each region's prices came from.
    system_instances: Mapping[str, SystemInstanceType] = field(default_factory=lambda: MappingProxyType({}))
    system_price_sources: Mapping[str, PriceSource] = field(default_factory=lambda: MappingProxyType({}))

    def in_families(self, families: tuple[str, ...]) -> tuple[InstanceType, ...]:
        return tuple(sorted((i for i in self.instances.values() if i.family in families), key=lambda i: i.name))

    def families(self) -> tuple[str, ...]:
        return tuple(sorted({i.family for i in self.instances.values()}))


def catalogue_from_data(data: dict) -> InstanceCatalogue:
    gpus = {key: GpuType(key, g["name"], float(g["memory_gib"]), float(g["fp16_tflops"]),
                         _optional_float(g.get("memory_bandwidth_gbs")), _optional_float(g.get("compute_capability")))
            for key, g in data["gpus"].items()}
    instances = {
        name: InstanceType(name, i["family"], gpus[i["gpu"]], int(i["gpus"]), int(i["vcpu"]), float(i["ram_gib"]),
                           MappingProxyType({r: float(p) for r, p in i["usd_per_hour"].items()}),
                           MappingProxyType({r: float(p) for r, p in (i.get("spot_usd_per_hour") or {}).items()}))
        for name, i in data["instances"].items()
    }
    sources = {region: MappingProxyType({kind: PriceSource(str(s["as_of"]), str(s["source"]))
                                         for kind, s in kinds.items()})
               for region, kinds in (data.get("prices") or {}).items()}
    eks = data.get("eks_usd_per_cluster_hour")
    system, system_sources = _system_instances(data.get("system_instances") or {})
    return InstanceCatalogue(str(data["as_of"]), str(data["source"]), MappingProxyType(instances),
                             MappingProxyType(sources), None if eks is None else float(eks), system, system_sources)


def _system_instances(data: dict) -> tuple[Mapping[str, SystemInstanceType], Mapping[str, PriceSource]]:
    """The ``system_instances`` section: ``types`` (no GPU fields) and ``prices`` (region -> dated source)."""
    types = {name: SystemInstanceType(name, i["family"], int(i["vcpu"]), float(i["ram_gib"]),
                                      MappingProxyType({r: float(p) for r, p in i["usd_per_hour"].items()}))
             for name, i in (data.get("types") or {}).items()}
    sources = {region: PriceSource(str(s["as_of"]), str(s["source"])) for region, s in (data.get("prices") or {}).items()}
    return MappingProxyType(types), MappingProxyType(sources)


def _optional_float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


def load_instance_catalogue(path: str | None = None) -> InstanceCatalogue:
    """The shipped table (or ``path``, e.g. one written by ``modelfleet prices refresh``)."""
    if path is None:
        text = resources.files("modelfleet").joinpath("data/instances.yaml").read_text(encoding="utf-8")
    else:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    return catalogue_from_data(yaml.safe_load(text))
