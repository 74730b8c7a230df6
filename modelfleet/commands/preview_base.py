"""``modelfleet preview --base REF``: the offline preview of both branches, compared (preview/diff.py).

The base side is read like ``cost --base`` reads it (commands/cost_sources.py): a git ref gives its
models.yaml, stack files and, when the price table in use is a file of the repository, that table; a
directory gives models.yaml and stacks/; a file is a models.yaml. Both sides run the working tree's Pulumi
program and compiler (as in ``cost --base``: the compiler is not read at the base), each from files written
to a temporary directory, so nothing of the checkout changes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass, replace

import yaml

from ..errors import Issue, SpecError
from ..spec.environment import list_stacks, stack_path
from ..spec.yaml_source import load_yaml
from . import project_from
from .cost import run_git
from ..spec.load import read_warmup_samples
from .cost_sources import project_relative, ref_sample_reader, ref_stacks, table_path

FORMATS = ("text", "markdown")


@dataclass(frozen=True)
class Inputs:
    """What one side's program runs on: its catalogue, its price table (None: the default) and its stacks."""

    models_path: str
    prices_path: str | None
    stacks: dict[str, dict]  # stack name -> the stack file's config


def head_inputs(args: argparse.Namespace) -> Inputs:
    project = project_from(args)
    stacks = {n: load_yaml(stack_path(project.stacks_dir, n)).data["config"] for n in list_stacks(project.stacks_dir)}
    return Inputs(project.models_path, project.prices_file, stacks)


def base_inputs(args: argparse.Namespace, scratch: str) -> Inputs:
    project, base = project_from(args), args.base
    if os.path.isfile(base):
        return Inputs(os.path.abspath(base), project.prices_file, head_inputs(args).stacks)
    if os.path.isdir(base):
        if not os.path.isfile(os.path.join(base, "models.yaml")):
            raise SpecError([Issue("", 0, 0, "--base", f"{base} has no models.yaml", "pass a directory with "
                                   "models.yaml and optionally stacks/, a models.yaml file, or a git ref")])
        stacks_dir = os.path.join(base, "stacks")
        stacks = ({n: load_yaml(stack_path(stacks_dir, n)).data["config"] for n in list_stacks(stacks_dir)}
                  if os.path.isdir(stacks_dir) else head_inputs(args).stacks)
        return Inputs(os.path.abspath(os.path.join(base, "models.yaml")), project.prices_file, stacks)
    return _ref_inputs(project, base, scratch)


def _ref_inputs(project, ref: str, scratch: str) -> Inputs:
    models_rel = project_relative(project, project.models_path)
    text = run_git(project.root, "show", f"{ref}:./{models_rel}")
    if text is None:
        raise SpecError([Issue("", 0, 0, "--base", f"{ref!r} is not a file or directory, and `git show "
                               f"{ref}:./{models_rel}` failed", "pass a models.yaml file, a directory, or a git ref "
                               "that has it (e.g. origin/main; fetch it first)")])
    models = os.path.join(scratch, "models.yaml")
    with open(models, "w", encoding="utf-8") as handle:
        handle.write(text)
    _ref_samples(project, ref, text, scratch)
    stacks = {}
    for name in ref_stacks(project.root, ref, run_git):
        data = yaml.safe_load(run_git(project.root, "show", f"{ref}:./stacks/Pulumi.{name}.yaml") or "") or {}
        stacks[name] = data.get("config", {}) if isinstance(data, dict) else {}
    return Inputs(models, _ref_prices(project, ref, scratch), stacks)


def _ref_samples(project, ref: str, text: str, scratch: str) -> None:
    """The warmup samples the ref's models.yaml names, beside its copy in ``scratch`` (a missing one is left out:
    the base then reports it as it would at that ref)."""
    read = ref_sample_reader(project, ref)
    for relative, content in read_warmup_samples(yaml.safe_load(text), read).items():
        if isinstance(content, bytes):
            target = os.path.join(scratch, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as handle:
                handle.write(content)


def _ref_prices(project, ref: str, scratch: str) -> str | None:
    """The price table at ``ref`` when the one in use is a file of the repository (else the same one)."""
    path, top = table_path(project), run_git(project.root, "rev-parse", "--show-toplevel")
    if path is None or top is None or os.path.relpath(path, top.strip()).startswith(".."):
        return project.prices_file
    text = run_git(top.strip(), "show", f"{ref}:{os.path.relpath(path, top.strip())}")
    if text is None:
        return project.prices_file
    out = os.path.join(scratch, "prices.yaml")
    with open(out, "w", encoding="utf-8") as handle:
        handle.write(text)
    return out


def run_base(args: argparse.Namespace) -> int:
    from ..preview.diff import compute_preview_diff
    from ..preview.diff_format import StackPreview, render_preview_diff_markdown, render_preview_diff_text
    from .preview import require_program, run_side

    project = project_from(args)
    project.stacks()  # a project without stacks is refused like every command's
    require_program(project.root)
    head = head_inputs(args)
    with tempfile.TemporaryDirectory(prefix="modelfleet-preview-base-") as scratch:
        base = base_inputs(args, scratch)
        names = args.stack or sorted(set(head.stacks) | set(base.stacks))
        unknown = [n for n in names if n not in head.stacks and n not in base.stacks]
        if unknown:
            raise SpecError([Issue("", 0, 0, "--stack", f"no stack named {n!r}", "use one of: "
                                   + ", ".join(sorted(set(head.stacks) | set(base.stacks)))) for n in unknown])
        previews, failed = [], 0
        for name in names:
            sides = [run_side(project.root, name, side) if name in side.stacks else None for side in (base, head)]
            if sides[1] is not None and sides[1].error:
                failed += 1
                print(sides[1].error, file=sys.stderr)
            compared = _compare(name, *sides, compute_preview_diff, StackPreview)
            previews.append(replace(compared, bumps=version_bumps(args, base, head, name)) if compared.diff else compared)
    render = render_preview_diff_markdown if args.format == "markdown" else render_preview_diff_text
    sys.stdout.write(render(previews, args.base))
    return 2 if failed else 0


def _compare(name, base, head, compute, StackPreview):
    if head is not None and head.error:
        return StackPreview(name, None, "❌ `pulumi up` stops: the program refuses the stack (see above)")
    if base is not None and base.error:
        return StackPreview(name, None, "the base does not compile: nothing to compare with")
    return StackPreview(name, compute(name, base.resources if base else [], head.resources if head else []))


def version_bumps(args: argparse.Namespace, base: Inputs, head: Inputs, stack: str) -> tuple[str, ...]:
    """Each model whose pinned version changes (#15), with the workload it rolls: both sides compiled with the
    working tree's stack files (a version is models.yaml's); () when either side does not compile."""
    from ..errors import ModelfleetError
    from ..plan.changes import version_change
    from ..project import Project

    try:
        plans = [Project(root=project_from(args).root, models_file=side.models_path, prices_file=side.prices_path)
                 .plan(stack) for side in (base, head)]
    except ModelfleetError:
        return ()
    common = sorted({m.name for m in plans[0].models} & {m.name for m in plans[1].models})
    return tuple(note for note in (version_change(name, *plans) for name in common) if note)
