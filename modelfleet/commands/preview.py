"""``modelfleet preview --stack NAME``: what `pulumi up --stack NAME` would create, without AWS or the CLI."""

from __future__ import annotations

import argparse
import os
import sys
import time

from ..errors import EXIT_USER_ERROR, Issue, SpecError
from ..spec.environment import stack_path
from ..spec.yaml_source import load_yaml
from . import add_project_arguments, project_from

NAME = "preview"
HELP = "run the Pulumi program under the SDK's mocks and show what `pulumi up` would create (no AWS, no CLI)"
PLACEHOLDER_TOKEN = "hf_offline_preview_placeholder"  # stands in for the stack's encrypted modelfleet:hfToken
HF_TOKEN = "modelfleet:hfToken"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser)
    parser.add_argument("--base", default=None, metavar="REF_OR_PATH",
                        help="also show what would change against another models.yaml (a file, a directory with "
                             "models.yaml, or a git ref): each resource added, removed or changed, version bumps named")


def require_program(root: str) -> None:
    """The Pulumi program this command runs: a project of models.yaml and stacks/ alone has none."""
    missing = [name for name, there in (("__main__.py", os.path.isfile), ("Pulumi.yaml", os.path.isfile),
                                        ("components/", os.path.isdir)) if not there(os.path.join(root, name))]
    if missing:
        raise SpecError([Issue(os.path.join(root, missing[0].rstrip("/")), 0, 0, "",
                               f"no Pulumi program here: `preview` runs the project's __main__.py (with Pulumi.yaml "
                               f"and components/) under Pulumi's mocks, and {', '.join(missing)} "
                               f"{'is' if len(missing) == 1 else 'are'} missing",
                               "copy __main__.py, Pulumi.yaml and components/ from the modelfleet repository into "
                               "the project; `modelfleet plan` and `render` need none of them")])


def stand_in_secrets(config: dict) -> dict[str, str]:
    """The stack's secrets the program reads, as stand-ins (they are encrypted in the stack file): only those
    the stack sets, so the program warns about a missing one as `pulumi preview` would."""
    return {HF_TOKEN: PLACEHOLDER_TOKEN} if HF_TOKEN in config else {}


def run(args: argparse.Namespace) -> int:
    from ..preview.format import format_preview  # pulumi is imported only by this edge command
    from ..preview.runner import run_program

    project = project_from(args)
    project.environment(args.stack)  # a missing or invalid stack file is reported like every command's
    require_program(project.root)
    config = load_yaml(stack_path(project.stacks_dir, args.stack)).data["config"]
    environ = {key: os.path.abspath(path) for key, path in
               (("MODELFLEET_MODELS", args.models), ("MODELFLEET_PRICES", args.prices)) if path}
    started = time.perf_counter()
    result = run_program(project.root, args.stack, config, stand_in_secrets(config), environ)
    if result.error:  # the program's RunError: every compile problem, located, as `pulumi up` shows them
        print(result.error, file=sys.stderr)
        return EXIT_USER_ERROR
    sys.stdout.write(format_preview(result))  # deterministic; the time and the program's messages go to stderr
    if args.base is not None:
        sys.stdout.write("\n" + _changes(args, project, config, environ, result))
    for level, message in result.messages:  # the program's own warnings (the plan's among them)
        print(f"{level}: {message}", file=sys.stderr)
    print(f"preview ran in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    return 0


def _base_models(project, base: str) -> tuple[str, str]:
    """(the base models.yaml's text, its label): a file, a directory's models.yaml, or a git ref's."""
    from .cost import run_git

    path = os.path.join(base, "models.yaml") if os.path.isdir(base) else base
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as handle:
            return handle.read(), path
    text = run_git(project.root, "show", f"{base}:./{os.path.relpath(project.models_path, project.root)}")
    if text is None:
        raise SpecError([Issue("", 0, 0, "--base", f"{base!r} is not a models.yaml, a directory holding one, or a "
                               "git ref that has one", "pass a file, a directory, or a ref such as origin/main")])
    return text, f"{base}:models.yaml"


def _changes(args: argparse.Namespace, project, config: dict, environ: dict, head) -> str:
    """The base side's preview, diffed against ``head``'s; each version bump named from the two plans."""
    import tempfile

    from ..plan.changes import version_change
    from ..preview.changes import format_changes
    from ..preview.runner import run_program
    from ..project import Project

    text, label = _base_models(project, args.base)
    with tempfile.TemporaryDirectory(prefix="modelfleet-base-") as work:
        models = os.path.join(work, "models.yaml")
        with open(models, "w", encoding="utf-8") as handle:
            handle.write(text)
        base_plan = Project(root=project.root, models_file=models, prices_file=args.prices).plan(args.stack)
        base = run_program(project.root, args.stack, config, stand_in_secrets(config),
                           {**environ, "MODELFLEET_MODELS": models})
    if base.error:
        return f"changes against the base ({label}): the base does not compile:\n{base.error}\n"
    plan = project.plan(args.stack)
    common = sorted({m.name for m in plan.models} & {m.name for m in base_plan.models})
    notes = [n for n in (version_change(name, base_plan, plan) for name in common) if n]
    return format_changes(label, notes, base, head)
