"""``modelfleet init DIR``: a fleet repository that works as it is (modelfleet/scaffold writes its text).

Every question has a flag. Where stdin is a terminal, each question no flag answered is asked (Enter takes the
default); with none (CI, a pipe) the documented defaults are taken and the command prints what it chose. It
refuses a non-empty directory unless ``--force``, and never overwrites a file: each is created exclusively, and
one that exists is kept and named.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from pydantic import ValidationError

from ..errors import Issue, OutputError, SpecError
from ..plan.hardware.instances import load_instance_catalogue
from ..scaffold import CHOICES, InitChoices, scaffold_files
from ..scaffold.choices import Choice, default_of
from .version import installed_version

NAME = "init"
HELP = ("write a fleet repository: Pulumi.yaml and a three-line __main__.py, models.yaml, dev and prod stacks, the "
        "pull-request and deploy workflows, CODEOWNERS and a README")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("directory", help="the repository's directory: new or empty (created if missing)")
    for choice in CHOICES:
        parser.add_argument(choice.flag, dest=choice.field, default=None, metavar="VALUE",
                            help=f"{choice.question}: {choice.values} (default: {default_of(choice.field)})")
    parser.add_argument("--force", action="store_true",
                        help="write into a non-empty directory; a file that exists is still kept, never overwritten")


def run(args: argparse.Namespace) -> int:
    choices = ask(args, interactive=sys.stdin is not None and sys.stdin.isatty())
    files = scaffold_files(choices, installed_version(), priced_regions=priced_regions())
    written, kept = write_new_files(args.directory, files, force=args.force)
    for path in written:
        print(f"  wrote {os.path.join(args.directory, path)}")
    for path in kept:
        print(f"  kept  {os.path.join(args.directory, path)} (it exists; not overwritten)")
    print(f"next: cd {args.directory} && modelfleet validate && modelfleet cost && modelfleet preview --stack prod")
    return 0


def priced_regions() -> tuple[str, ...]:
    """The regions the shipped price table prices on demand."""
    return tuple(region for region, kinds in load_instance_catalogue().price_sources.items() if "on-demand" in kinds)


def ask(args: argparse.Namespace, interactive: bool, prompt: Callable[[str], str] = input) -> InitChoices:
    """The flags' answers, then a prompt (interactive) or the default (printed) for each question left."""
    answers = {c.field: getattr(args, c.field) for c in CHOICES if getattr(args, c.field) is not None}
    _check(answers)
    for choice in CHOICES:
        if choice.field in answers:
            print(f"{choice.field}: {answers[choice.field]} ({choice.flag})")
        elif interactive:
            answers[choice.field] = _prompt(choice, prompt)
        else:
            answers[choice.field] = default_of(choice.field)
            print(f"{choice.field}: {answers[choice.field]} (default, no terminal to ask; {choice.flag} to choose)")
    return InitChoices(**answers)


def _prompt(choice: Choice, prompt: Callable[[str], str]) -> str:
    while True:
        answer = prompt(f"{choice.question} ({choice.values}) [{default_of(choice.field)}]: ").strip()
        answer = answer or default_of(choice.field)
        try:
            _check({choice.field: answer})
            return answer
        except SpecError as error:
            print(f"{error.issues[0].message}; again:", file=sys.stderr)


def _check(answers: dict[str, str]) -> None:
    """Every flag's problem at once, each named by its flag, with what it may be."""
    try:
        InitChoices(**answers)
    except ValidationError as error:
        by_field = {c.field: c for c in CHOICES}
        raise SpecError([_issue(by_field[str(e["loc"][0])], answers[str(e["loc"][0])], e["msg"])
                         for e in error.errors()]) from None


def _issue(choice: Choice, value: str, message: str) -> Issue:
    if message.startswith(("String should match pattern", "Input should be")):
        message = f"{value!r} is not {choice.values}"
    return Issue("modelfleet init", 0, 0, choice.flag, message.removeprefix("Value error, "), f"{choice.flag} VALUE")


def write_new_files(directory: str, files: dict[str, str], *, force: bool) -> tuple[list[str], list[str]]:
    """Creates each file exclusively (an existing one is kept); refuses a non-empty directory without force."""
    if os.path.isdir(directory) and os.listdir(directory) and not force:
        raise OutputError([Issue(directory, 0, 0, "", "the directory is not empty: `init` writes a new repository",
                                 "choose a new or empty directory, or pass --force to add the missing files (an "
                                 "existing file is never overwritten)")])
    written, kept = [], []
    for path, text in files.items():
        target = os.path.join(directory, path)
        os.makedirs(os.path.dirname(target) or ".", exist_ok=True)
        try:
            with open(target, "x", encoding="utf-8") as handle:
                handle.write(text)
            written.append(path)
        except FileExistsError:
            kept.append(path)
        except OSError as error:
            raise OutputError([Issue(target, 0, 0, "", f"cannot write it: {error.strerror}",
                                     "choose a directory you can write")]) from None
    return written, kept
