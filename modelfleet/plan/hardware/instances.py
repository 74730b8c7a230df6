"""The instance catalogue: hardware and dated on-demand prices, shipped as data (data/instances.yaml).

GPU types (``instances``) are what the compiler places models on. CPU types (``cpu_instances``) host the
classic models that run on KIND_CPU instances (``device: cpu``, or chosen by the compiler: plan/triton/devices.py);
a stack allows them through ``instanceFamilies`` like the GPU families. They are kept apart from the GPU
types, so no GPU search (LLM layouts, the GPU packing) ever sees one. A created cluster's system nodes run
on non-GPU types priced in a section of their own (``system_instances``): no model can land on one.

Loading is the only I/O here and happens at the edge (``load_instance_catalogue``); the compiler receives
the catalogue as a value, so tests can hand it any table they like.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Mapping

import yaml

from ...errors import Issue, SpecError


@dataclass(kw_only=True, frozen=True)
class GpuType:
    key: str
    name: str
    memory_gib: float  # usable per GPU
    fp16_tflops: float  # dense, per GPU
    memory_bandwidth_gbs: float | None = None  # None: unknown (throughput is then scaled by compute alone)
    compute_capability: float | None = None  # CUDA compute capability; None: unknown (bf16 assumed, FP8 not)
    # sxm (NVLink board parts: A100, H100, H200) or pcie (T4, A10G, L4, L40S): which calibrated GPU's measured
    # efficiencies an uncalibrated one may borrow (llm/speed/calibration.py), never across the two.
    form_factor: str = "pcie"


@dataclass(kw_only=True, frozen=True)
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
    # The VPC CNI's pod limit for the type (amazon-eks-ami's eni-max-pods.txt); None: unknown (110 assumed).
    eni_max_pods: int | None = None
    instance_store_gb: int = 0  # local NVMe in all, decimal GB as AWS states it; 0: none
    # Regions whose spot figure is the table's estimate, not a price anyone published or measured (the region's
    # ``prices.<region>.spot.estimated``): the cost preview says so beside every figure it rests on.
    spot_estimated: frozenset[str] = frozenset()

    @property
    def instance_store_gib(self) -> int:
        """The instance store in whole GiB (AWS states decimal GB), rounded down."""
        return self.instance_store_gb * 10**9 // 2**30

    @property
    def gpu_memory_gib(self) -> float:
        return self.gpu.memory_gib

    def price(self, region: str) -> float | None:
        return self.usd_per_hour.get(region)

    def spot_price(self, region: str) -> float | None:
        return self.spot_usd_per_hour.get(region)


@dataclass(frozen=True)
class CpuType:
    """A processor model: measured CPU figures (``profile.cpu``) apply to every family with the same one."""

    key: str
    name: str  # as the Pricing API's physicalProcessor attribute spells it
    code_name: str  # e.g. "Sapphire Rapids": what `prices refresh` looks for in physicalProcessor


@dataclass(kw_only=True, frozen=True)
class CpuInstanceType:
    """A CPU-only node type for KIND_CPU Triton servers; the attributes the kubelet and pricing rules read
    are named as InstanceType's (``gpus`` is 0), so a node group's allocatable is derived the same way."""

    name: str
    family: str
    processor: CpuType
    vcpu: int
    ram_gib: float
    usd_per_hour: Mapping[str, float]  # on-demand, by region; a region missing here is "unknown"
    spot_usd_per_hour: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    eni_max_pods: int | None = None  # as InstanceType's
    instance_store_gb: int = 0  # the catalogue lists EBS-only types (no d variants)
    gpus: int = 0
    spot_estimated: frozenset[str] = frozenset()  # as InstanceType's

    @property
    def instance_store_gib(self) -> int:
        return self.instance_store_gb * 10**9 // 2**30

    def price(self, region: str) -> float | None:
        return self.usd_per_hour.get(region)

    def spot_price(self, region: str) -> float | None:
        return self.spot_usd_per_hour.get(region)


@dataclass(frozen=True)
class PriceSource:
    """Where one region's prices of one kind (``on-demand`` or ``spot``) came from, and when."""

    as_of: str
    source: str
    # True: the figures are modelfleet's estimate (e.g. spot as a fraction of on-demand), not a published or
    # measured price; the cost preview then says "estimated" wherever it uses them.
    estimated: bool = False


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


GP3_INCLUDED_IOPS = 3000  # a gp3 volume's baseline, in its per-GiB price
GP3_INCLUDED_MIBPS = 125


@dataclass(frozen=True)
class Gp3Price:
    """One region's EBS gp3 prices, USD per month: per GiB, per IOPS and per MiB/s above the included."""

    usd_per_gib_month: float
    usd_per_iops_month: float
    usd_per_mibps_month: float

    def monthly(self, size_gib: int, iops: int, throughput_mibps: int) -> float:
        """One volume's USD per month."""
        return (size_gib * self.usd_per_gib_month
                + max(0, iops - GP3_INCLUDED_IOPS) * self.usd_per_iops_month
                + max(0, throughput_mibps - GP3_INCLUDED_MIBPS) * self.usd_per_mibps_month)


@dataclass(kw_only=True, frozen=True)
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
    # EBS gp3 (every node's volume) by region, and where each region's prices came from; missing: unknown.
    ebs_gp3: Mapping[str, Gp3Price] = field(default_factory=lambda: MappingProxyType({}))
    ebs_price_sources: Mapping[str, PriceSource] = field(default_factory=lambda: MappingProxyType({}))
    # CPU-only types for KIND_CPU servers, priced with the GPU types (same region sources, same refresh).
    cpu_instances: Mapping[str, CpuInstanceType] = field(default_factory=lambda: MappingProxyType({}))
    # The GPU registry: every GPU the table knows (``gpus:``), by key, whether or not a type carries it yet.
    gpus: Mapping[str, GpuType] = field(default_factory=lambda: MappingProxyType({}))

    def in_families(self, families: tuple[str, ...]) -> tuple[InstanceType, ...]:
        """The GPU types of ``families`` (CPU families among them are ignored here)."""
        return tuple(sorted((i for i in self.instances.values() if i.family in families), key=lambda i: i.name))

    def cpu_in_families(self, families: tuple[str, ...]) -> tuple[CpuInstanceType, ...]:
        """The CPU types of ``families`` (GPU families among them are ignored here)."""
        return tuple(sorted((i for i in self.cpu_instances.values() if i.family in families), key=lambda i: i.name))

    def families(self) -> tuple[str, ...]:
        """Every family a stack may name: GPU and CPU."""
        return tuple(sorted({i.family for i in (*self.instances.values(), *self.cpu_instances.values())}))

    def cpu_families(self) -> tuple[str, ...]:
        return tuple(sorted({i.family for i in self.cpu_instances.values()}))

    def node_type(self, name: str) -> InstanceType | CpuInstanceType | None:
        """A node group's instance type, GPU or CPU (None: not in the table)."""
        return self.instances.get(name) or self.cpu_instances.get(name)


FORM_FACTORS = ("sxm", "pcie")


def catalogue_from_data(data: dict) -> InstanceCatalogue:
    gpus = {key: _gpu(key, g) for key, g in data["gpus"].items()}
    sources = {region: MappingProxyType({kind: _price_source(f"prices.{region}.{kind}", s) for kind, s in kinds.items()})
               for region, kinds in (data.get("prices") or {}).items()}
    estimated = frozenset(r for r, kinds in sources.items() if "spot" in kinds and kinds["spot"].estimated)
    instances = {
        name: InstanceType(name=name, family=i["family"], gpu=gpus[i["gpu"]], gpus=int(i["gpus"]), vcpu=int(i["vcpu"]),
                           ram_gib=float(i["ram_gib"]),
                           usd_per_hour=MappingProxyType({r: float(p) for r, p in i["usd_per_hour"].items()}),
                           spot_usd_per_hour=MappingProxyType(
                               {r: float(p) for r, p in (i.get("spot_usd_per_hour") or {}).items()}),
                           eni_max_pods=_optional_int(i.get("eni_max_pods")),
                           instance_store_gb=int(i.get("instance_store_gb") or 0), spot_estimated=estimated)
        for name, i in data["instances"].items()
    }
    eks = data.get("eks_usd_per_cluster_hour")
    system, system_sources = _system_instances(data.get("system_instances") or {})
    ebs, ebs_sources = _ebs_gp3(data.get("ebs_gp3") or {})
    return InstanceCatalogue(as_of=str(data["as_of"]), source=str(data["source"]),
                             instances=MappingProxyType(instances), price_sources=MappingProxyType(sources),
                             eks_usd_per_cluster_hour=None if eks is None else float(eks), system_instances=system,
                             system_price_sources=system_sources, ebs_gp3=ebs, ebs_price_sources=ebs_sources,
                             cpu_instances=_cpu_instances(data.get("cpus") or {}, data.get("cpu_instances") or {},
                                                          estimated),
                             gpus=MappingProxyType(gpus))


def _price_source(where: str, entry: dict) -> PriceSource:
    estimated = entry.get("estimated", False)
    if not isinstance(estimated, bool):
        raise _TableProblem(f"{where}.estimated", f"must be true or false, not {estimated!r}",
                            "write estimated: true for figures the table estimates (not published or measured), "
                            "or leave it out")
    return PriceSource(str(entry["as_of"]), str(entry["source"]), estimated)


def _gpu(key: str, entry: dict) -> GpuType:
    """One ``gpus:`` entry. ``form_factor`` is required: it decides whose measured efficiencies an
    uncalibrated GPU borrows, and a guess there would be silent."""
    form = entry.get("form_factor")
    if form not in FORM_FACTORS:
        raise _TableProblem(f"gpus.{key}.form_factor", f"is {form!r}, not one of {', '.join(FORM_FACTORS)}",
                            "sxm: NVLink board parts such as H100 SXM; pcie: cards such as L40S")
    return GpuType(key=key, name=entry["name"], memory_gib=float(entry["memory_gib"]),
                   fp16_tflops=float(entry["fp16_tflops"]),
                   memory_bandwidth_gbs=_optional_float(entry.get("memory_bandwidth_gbs")),
                   compute_capability=_optional_float(entry.get("compute_capability")), form_factor=str(form))


def _cpu_instances(cpus: dict, types: dict,
                   spot_estimated: frozenset[str] = frozenset()) -> Mapping[str, CpuInstanceType]:
    """The ``cpus`` (processors) and ``cpu_instances`` sections."""
    processors = {key: CpuType(key, str(c["name"]), str(c["code_name"])) for key, c in cpus.items()}
    return MappingProxyType({
        name: CpuInstanceType(name=name, family=i["family"], processor=processors[i["cpu"]], vcpu=int(i["vcpu"]),
                              ram_gib=float(i["ram_gib"]),
                              usd_per_hour=MappingProxyType({r: float(p) for r, p in i["usd_per_hour"].items()}),
                              spot_usd_per_hour=MappingProxyType(
                               {r: float(p) for r, p in (i.get("spot_usd_per_hour") or {}).items()}),
                              eni_max_pods=_optional_int(i.get("eni_max_pods")), spot_estimated=spot_estimated)
        for name, i in types.items()})


def _ebs_gp3(data: dict) -> tuple[Mapping[str, Gp3Price], Mapping[str, PriceSource]]:
    """The ``ebs_gp3`` section: three prices per region, and each region's dated source. A region is priced
    only when all three are there (a volume's cost needs each of them)."""
    keys = ("usd_per_gib_month", "usd_per_iops_month", "usd_per_mibps_month")
    regions = set.intersection(*(set(data.get(key) or {}) for key in keys))
    prices = {region: Gp3Price(*(float(data[key][region]) for key in keys)) for region in sorted(regions)}
    sources = {region: PriceSource(str(s["as_of"]), str(s["source"])) for region, s in (data.get("prices") or {}).items()}
    return MappingProxyType(prices), MappingProxyType(sources)


def _system_instances(data: dict) -> tuple[Mapping[str, SystemInstanceType], Mapping[str, PriceSource]]:
    """The ``system_instances`` section: ``types`` (no GPU fields) and ``prices`` (region -> dated source)."""
    types = {name: SystemInstanceType(name, i["family"], int(i["vcpu"]), float(i["ram_gib"]),
                                      MappingProxyType({r: float(p) for r, p in i["usd_per_hour"].items()}))
             for name, i in (data.get("types") or {}).items()}
    sources = {region: PriceSource(str(s["as_of"]), str(s["source"])) for region, s in (data.get("prices") or {}).items()}
    return MappingProxyType(types), MappingProxyType(sources)


def _optional_int(value: object) -> int | None:
    return None if value is None else int(value)  # type: ignore[call-overload]


def _optional_float(value: object) -> float | None:
    return None if value is None else float(value)  # type: ignore[arg-type]


# libyaml where PyYAML has it: the table is 300 lines of flow mappings, which the Python parser takes half a
# second over, and every command reads it (some twice).
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=8)
def _parsed(text: str) -> InstanceCatalogue:
    """One parse per table text: the catalogue is frozen, so every reader may share it."""
    return catalogue_from_data(yaml.load(text, Loader=_LOADER))  # noqa: S506 (a safe loader)


class _TableProblem(ValueError):
    def __init__(self, where: str, message: str, fix: str) -> None:
        super().__init__(f"{where}: {message}")
        self.where, self.message, self.fix = where, message, fix


def load_instance_catalogue(path: str | None = None) -> InstanceCatalogue:
    """The shipped table (or ``path``, e.g. one written by ``modelfleet prices refresh``). A table that is not
    one is a SpecError naming the file (never a traceback from deep in the loader)."""
    if path is None:
        text = resources.files("modelfleet").joinpath("data/instances.yaml").read_text(encoding="utf-8")
    else:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    where = path or "modelfleet/data/instances.yaml"
    try:
        return _parsed(text)
    except _TableProblem as problem:
        raise SpecError([Issue(where, 0, 0, problem.where, problem.message, problem.fix)]) from None
    except (KeyError, TypeError, ValueError, AttributeError, yaml.YAMLError) as exc:
        missing = f"a required key {exc} is missing" if isinstance(exc, KeyError) else str(exc)
        raise SpecError([Issue(where, 0, 0, "", f"not an instance table: {missing}",
                               "compare it with the shipped modelfleet/data/instances.yaml, or write one with "
                               "`modelfleet prices refresh`")]) from None
