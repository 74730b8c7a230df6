"""The two sides of ``cost --base``, read from disk or git, and each stack priced on its own.

A side is everything a cost is computed from: models.yaml, the stack files and the price table. The head
is the working tree. A base git ref reads all three at that ref (``git show REF:path``), so a pull request
that only switches a stack to spot, or only edits the price table, shows what that does; a price table
outside the repository (an installed package) is the same on both sides, and the report says so. A base
FILE is only a models.yaml (stacks and prices are the head's); a base DIRECTORY holds models.yaml and,
optionally, stacks/.

Each stack is priced separately and failures are kept per stack (:class:`StackFailure`): one stack that
does not compile is reported with its errors while the others keep their figures. Reading files is here;
git is asked through an injected :data:`Git` runner (the command passes one that runs the git binary, so
this module starts no process). Pricing a side that is already read (:func:`price_stack`,
:func:`compare_stack`) is pure.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from importlib import resources
from typing import Any, TypeVar

import yaml

from ..cost.diff import CAUSES, StackCost, StackFailure, StackSides, Step, describe_config_changes
from ..cost.policy import cost_environment
from ..errors import Issue, ModelfleetError, SpecError
from ..plan.hardware.instances import InstanceCatalogue, catalogue_from_data
from ..project import FleetSource, Project
from ..spec.environment import EnvironmentSpec, list_stacks, parse_environment, stack_path
from ..spec.load import ConfigReader, SampleReader, disk_reader, parse_fleet
from ..spec.yaml_source import Document, load_yaml, parse_yaml

PRICE_TABLE = "modelfleet/data/instances.yaml"  # the shipped table, for labels
# ``git(root, *args)``: the output of ``git -C root args...``, or None when git fails (no repository, no such
# ref or path). Injected by the command; tests may pass their own.
Git = Callable[..., "str | None"]


@dataclass(frozen=True)
class Side:
    """What one side is priced from. A part that could not be read is kept as its error."""

    label: str  # "working tree", "main"
    models: FleetSource | ModelfleetError
    stacks: Mapping[str, Document | ModelfleetError]  # stack name -> its parsed file
    catalogue: InstanceCatalogue
    sources: tuple[str, ...]  # where each part came from, one line each
    # Files of the compiler (the modelfleet package, its price data aside) that differ between a base git ref
    # and the working tree: both sides are compiled by the working tree's code, so their effect is not priced.
    compiler_changes: tuple[str, ...] = ()


# ---------------------------------------------------------------------------------------------- pricing
def price_stack(side: Side, stack: str) -> StackCost | None:
    """One stack of ``side`` compiled and priced (guardrails evaluated, not enforced); None: no such stack."""
    if stack not in side.stacks:
        return None
    try:
        if isinstance(side.models, ModelfleetError):
            raise side.models
        fleet, doc = side.models
        env = environment_from(side.stacks[stack], stack, side.catalogue.families())
        return cost_environment(fleet, doc, env, side.catalogue)
    except ModelfleetError as exc:
        return StackFailure(stack, exc.issues)


def environment_from(doc: Document | ModelfleetError, stack: str, families: tuple[str, ...]) -> EnvironmentSpec:
    """A stack file's environment, as ``load_environment`` reads it from disk; ``families``: those of the
    side's price table (a stack may name only families the table prices)."""
    if isinstance(doc, ModelfleetError):
        raise doc
    config = doc.data.get("config") if isinstance(doc.data, dict) else None
    if doc.issues or not isinstance(config, dict):
        raise SpecError(doc.issues or [doc.issue((), "a stack file needs a `config:` mapping", "add `config:`")])
    return parse_environment(stack, config, doc, families=families)


def compare_stack(base: Side, head: Side, stack: str) -> StackSides:
    """The stack on both sides, and priced after each changed input of the head is swapped into the base
    (in CAUSES order), so each change's effect is its own step."""
    before, after = price_stack(base, stack), price_stack(head, stack)
    changed = [(cause, field) for cause, field in zip(CAUSES, ("catalogue", "stacks", "models"))
               if _differs(base, head, field, stack)]
    steps, current = [], base
    for index, (cause, field) in enumerate(changed):
        last = index == len(changed) - 1
        current = head if last else replace(current, **{field: getattr(head, field)})
        steps.append(Step(cause, _details(base, head, field, stack, (before, after)),
                          after if last else price_stack(current, stack)))
    return StackSides(base=before, head=after, steps=tuple(steps))


def _differs(base: Side, head: Side, field: str, stack: str) -> bool:
    if field == "catalogue":
        return base.catalogue != head.catalogue
    if field == "stacks":
        return _data(base.stacks.get(stack)) != _data(head.stacks.get(stack))
    return _data(base.models) != _data(head.models)


def _data(part: object) -> object:
    """What a parsed file says (not where it says it); an unreadable file compares by its errors."""
    if isinstance(part, ModelfleetError):
        return [(i.path, i.message) for i in part.issues]
    if isinstance(part, tuple):
        return part[1].data
    return part.data if isinstance(part, Document) else part


def _details(base: Side, head: Side, field: str, stack: str, priced: tuple[StackCost | None, ...]) -> tuple[str, ...]:
    if field == "stacks":
        config = [_data(s.stacks.get(stack)) for s in (base, head)]
        return describe_config_changes(*[c.get("config", {}) if isinstance(c, dict) else {} for c in config]) or (
            f"stacks/Pulumi.{stack}.yaml",)
    if field == "catalogue":
        used = [p for p in priced if p is not None and not isinstance(p, StackFailure)]
        groups = [g for p in used for g in (*p.cost.node_groups, p.cost.system_nodes)]  # type: ignore[union-attr]
        types = {g.instance_type for g in groups if g is not None}  # a created cluster's system nodes too
        regions = {p.cost.region for p in used}  # type: ignore[union-attr]
        return describe_catalogue_changes(base.catalogue, head.catalogue, types if used else None,
                                          regions if used else None) or ("no price or type this stack uses",)
    return ()


def describe_catalogue_changes(before: InstanceCatalogue, after: InstanceCatalogue, types: set[str] | None = None,
                               regions: set[str] | None = None) -> tuple[str, ...]:
    """The price table's changes to ``types`` in ``regions`` (None: all): prices, hardware, their GPUs, EKS."""
    names = sorted((set(before.instances) | set(after.instances)) & (types if types is not None else {
        *before.instances, *after.instances}))
    lines: list[str] = []
    gpus: set[tuple[object, object]] = set()
    for name in names:
        a, b = before.instances.get(name), after.instances.get(name)
        if a is None or b is None:
            lines.append(f"{name} {'added' if a is None else 'removed'}")
            continue
        for kind, p0, p1 in (("on-demand", a.usd_per_hour, b.usd_per_hour),
                             ("spot", a.spot_usd_per_hour, b.spot_usd_per_hour)):
            lines += [f"{name} {kind} {region}: {p0.get(region, 'unknown')} -> {p1.get(region, 'unknown')} USD/h"
                      for region in sorted((set(p0) | set(p1)) & (regions if regions is not None else {*p0, *p1}))
                      if p0.get(region) != p1.get(region)]
        lines += [f"{name}: {change}" for change in _field_changes(a, b, ("gpus", "vcpu", "ram_gib"))]
        gpus.add((a.gpu, b.gpu))
    for a_gpu, b_gpu in sorted(gpus, key=lambda pair: pair[1].key):  # type: ignore[attr-defined]
        changes = _field_changes(a_gpu, b_gpu, tuple(f.name for f in dataclasses.fields(b_gpu)))  # type: ignore[arg-type]
        lines += [f"GPU {b_gpu.key}: {', '.join(changes)}"] if changes else []  # type: ignore[attr-defined]
    lines += _system_type_changes(before, after, types, regions)
    if before.eks_usd_per_cluster_hour != after.eks_usd_per_cluster_hour:
        lines.append(f"EKS control plane {before.eks_usd_per_cluster_hour} -> {after.eks_usd_per_cluster_hour} USD/h")
    lines += _ebs_changes(before, after, regions)
    return tuple(lines)


def _ebs_changes(before: InstanceCatalogue, after: InstanceCatalogue, regions: set[str] | None) -> list[str]:
    """The EBS gp3 prices every node's volume is billed at, per region: ``EBS gp3 us-east-1: 0.08 -> 0.09 USD
    per GiB-month``."""
    lines = []
    units = (("usd_per_gib_month", "GiB"), ("usd_per_iops_month", "IOPS"), ("usd_per_mibps_month", "MiB/s"))
    both = set(before.ebs_gp3) | set(after.ebs_gp3)
    for region in sorted(both & regions if regions is not None else both):
        a, b = before.ebs_gp3.get(region), after.ebs_gp3.get(region)
        for key, unit in units:
            p0, p1 = (getattr(a, key) if a else "unknown"), (getattr(b, key) if b else "unknown")
            if p0 != p1:
                lines.append(f"EBS gp3 {region}: {p0} -> {p1} USD per {unit}-month")
    return lines


def _system_type_changes(before: InstanceCatalogue, after: InstanceCatalogue, types: set[str] | None,
                         regions: set[str] | None) -> list[str]:
    """The same for the system node types (system_instances): on-demand prices and hardware."""
    both = set(before.system_instances) | set(after.system_instances)
    lines: list[str] = []
    for name in sorted(both & types if types is not None else both):
        a, b = before.system_instances.get(name), after.system_instances.get(name)
        if a is None or b is None:
            lines.append(f"system type {name} {'added' if a is None else 'removed'}")
            continue
        p0, p1 = a.usd_per_hour, b.usd_per_hour
        lines += [f"{name} on-demand {region}: {p0.get(region, 'unknown')} -> {p1.get(region, 'unknown')} USD/h"
                  for region in sorted((set(p0) | set(p1)) & (regions if regions is not None else {*p0, *p1}))
                  if p0.get(region) != p1.get(region)]
        lines += [f"{name}: {change}" for change in _field_changes(a, b, ("vcpu", "ram_gib"))]
    return lines


def _field_changes(a: object, b: object, fields: tuple[str, ...]) -> list[str]:
    return [f"{f} {getattr(a, f, None)} -> {getattr(b, f, None)}" for f in fields
            if getattr(a, f, None) != getattr(b, f, None)]


# ---------------------------------------------------------------------------------------------- reading
def read_head(project: Project) -> Side:
    """The working tree: models.yaml, stacks/ and the price table in use (a project without stacks is refused:
    an empty report would pass for a checked one)."""
    project.stacks()
    stacks = _read_stack_files(project.stacks_dir)
    models = _load(project.fleet_source)
    return Side("working tree", models, stacks, project.catalogue(),
                (f"models.yaml: {project_relative(project, project.models_path)}", "stacks: stacks/",
                 f"price table: {project.prices_file or PRICE_TABLE}"))


def read_base(project: Project, base: str, head: Side, git: Git) -> Side:
    """``base``: a models.yaml file, a directory with models.yaml (and stacks/), or a git ref."""
    if os.path.isfile(base):
        with open(base, encoding="utf-8") as handle:
            text = handle.read()
        return replace(head, label=base, models=_parse_models(text, base, tuple(head.stacks)),
                       sources=(f"models.yaml: {base}", "stacks: the working tree's (a base file is only models.yaml)",
                                "price table: the working tree's"))
    if os.path.isdir(base):
        return _read_directory(project, base, head)
    return _read_ref(project, base, git)


def _read_directory(project: Project, base: str, head: Side) -> Side:
    if not os.path.isfile(os.path.join(base, "models.yaml")):  # a wrong argument, not a base that fails to compile
        raise SpecError([Issue("", 0, 0, "--base", f"{base} has no models.yaml", "pass a directory with models.yaml "
                               "and optionally stacks/, a models.yaml file, or a git ref")])
    stacks_dir = os.path.join(base, "stacks")
    stacks = _read_stack_files(stacks_dir) if os.path.isdir(stacks_dir) else head.stacks
    path = os.path.join(base, "models.yaml")

    def parse() -> FleetSource:
        doc = load_yaml(path)
        return parse_fleet(doc, tuple(stacks) or None), doc
    models = _load(parse)
    where = stacks_dir if os.path.isdir(stacks_dir) else "the working tree's"
    return replace(head, label=base, models=models, stacks=stacks,
                   sources=(f"models.yaml: {os.path.join(base, 'models.yaml')}", f"stacks: {where}",
                            "price table: the working tree's"))


def _read_ref(project: Project, ref: str, git: Git) -> Side:
    models_rel = project_relative(project, project.models_path)
    text = git(project.root, "show", f"{ref}:./{models_rel}")
    if text is None:
        raise SpecError([Issue("", 0, 0, "--base", f"{ref!r} is not a file or directory, and `git show "
                               f"{ref}:./{models_rel}` failed", "pass a models.yaml file, a directory, or a git ref "
                               "that has it (e.g. origin/main; fetch it first)")])
    names = ref_stacks(project.root, ref, git)
    stacks = {n: _load(parse_yaml, git(project.root, "show", f"{ref}:./stacks/Pulumi.{n}.yaml") or "",
                       f"{ref}:stacks/Pulumi.{n}.yaml") for n in names}
    catalogue, table_source = _ref_catalogue(project, ref, git)
    return Side(ref, _parse_models(text, f"{ref}:{models_rel}", tuple(names), _ref_reader(project, ref, git),
                                   ref_sample_reader(project, ref)),
                stacks, catalogue,
                (f"models.yaml: {ref}:{models_rel}", f"stacks: {ref}:stacks/", f"price table: {table_source}"),
                _compiler_changes(project, ref, git))


def _compiler_changes(project: Project, ref: str, git: Git) -> tuple[str, ...]:
    """The compiler's source files that differ from ``ref``, when the running package lives in the project's
    own repository (an installed release, or another checkout, has no base there to differ from); its price
    data is a side of its own."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # modelfleet/, this module is in commands/
    top, project_top = git(package, "rev-parse", "--show-toplevel"), git(project.root, "rev-parse", "--show-toplevel")
    if top is None or project_top is None or os.path.realpath(top.strip()) != os.path.realpath(project_top.strip()):
        return ()
    listing = git(top.strip(), "diff", "--name-only", ref, "--", os.path.relpath(package, top.strip()))
    data = os.path.relpath(os.path.join(package, "data"), top.strip()) + os.sep
    return tuple(sorted(p for p in (listing or "").splitlines() if p and not p.startswith(data)))


def compiler_caveats(base: Side) -> tuple[str, ...]:
    """What a diff against ``base`` cannot show: the effect of a change to the compiler itself."""
    if not base.compiler_changes:
        return ()
    shown = ", ".join(base.compiler_changes[:5]) + (", ..." if len(base.compiler_changes) > 5 else "")
    return (f"the compiler itself differs from {base.label} ({len(base.compiler_changes)} file(s): {shown}); both "
            "sides are compiled by this branch's code, so what that change does to the cost is not in these "
            f"figures: compare `modelfleet cost` run on {base.label} with this branch's",)


def ref_stacks(root: str, ref: str, git: Git) -> tuple[str, ...]:
    listing = git(root, "ls-tree", "--name-only", f"{ref}:./stacks")
    names = (listing or "").splitlines()
    return tuple(sorted(n[len("Pulumi."):-len(".yaml")] for n in names if n.startswith("Pulumi.") and n.endswith(".yaml")))


def _ref_catalogue(project: Project, ref: str, git: Git) -> tuple[InstanceCatalogue, str]:
    """The price table at ``ref`` when the table in use is a file of this repository, else the same one."""
    path = table_path(project)
    top = git(project.root, "rev-parse", "--show-toplevel")
    inside = path is not None and top is not None and not os.path.relpath(path, top.strip()).startswith("..")
    if inside:
        rel = os.path.relpath(path, top.strip())  # type: ignore[arg-type]
        text = git(top.strip(), "show", f"{ref}:{rel}")  # type: ignore[union-attr]
        if text is not None:
            return catalogue_from_data(yaml.safe_load(text)), f"{ref}:{rel}"
        return project.catalogue(), f"the working tree's on both sides ({rel} is not in {ref})"
    shown = project.prices_file or f"{PRICE_TABLE}, the installed package's,"
    return project.catalogue(), f"the working tree's on both sides ({shown} is not in this repository)"


def table_path(project: Project) -> str | None:
    if project.prices_file is not None:
        return os.path.abspath(project.prices_file)
    shipped = resources.files("modelfleet").joinpath("data/instances.yaml")
    return str(shipped) if os.path.isfile(str(shipped)) else None


def _read_stack_files(stacks_dir: str) -> dict[str, Document | ModelfleetError]:
    return {name: _load(load_yaml, stack_path(stacks_dir, name)) for name in list_stacks(stacks_dir)}


def _parse_models(text: str, label: str, stacks: tuple[str, ...], read_config: ConfigReader | None = None,
                  read_sample: SampleReader | None = None) -> FleetSource | ModelfleetError:
    def parse() -> FleetSource:
        doc = parse_yaml(text, label)
        return parse_fleet(doc, stacks or None, read_config or disk_reader(label), read_sample), doc
    return _load(parse)


def ref_sample_reader(project: Project, ref: str) -> SampleReader:
    """Warmup samples (warmup: {inputs: ...}) as they are at ``ref``, beside its models.yaml, as bytes."""
    from .cost import run_git_bytes

    base = os.path.dirname(project_relative(project, project.models_path))

    def read(relative: str) -> bytes:
        content = run_git_bytes(project.root, "show", f"{ref}:./{os.path.join(base, relative)}")
        if content is None:
            raise OSError(f"not in {ref}")
        return content
    return read


def _ref_reader(project: Project, ref: str, git: Git) -> ConfigReader:
    """Config files (architecture: {config: ...}) as they are at ``ref``, beside its models.yaml."""
    base = os.path.dirname(project_relative(project, project.models_path))

    def read(relative: str) -> str:
        text = git(project.root, "show", f"{ref}:./{os.path.join(base, relative)}")
        if text is None:
            raise OSError(f"not in {ref}")
        return text
    return read


T = TypeVar("T")


def _load(read: Callable[..., T], *args: Any) -> T | ModelfleetError:
    """``read(*args)``, or the ModelfleetError it raised: a side keeps an unreadable part as its error."""
    try:
        return read(*args)
    except ModelfleetError as exc:
        return exc


def project_relative(project: Project, path: str) -> str:
    return os.path.relpath(path, project.root)
