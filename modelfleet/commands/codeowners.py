"""``modelfleet codeowners [--check]``: .github/CODEOWNERS from the teams in models.yaml (scaffold/codeowners.py
has the mapping: team T is @<org>/T, the platform team owns the rest). Without --check it writes the file; with
it, it only compares and exits 1 with the difference, as the pull-request workflow runs it."""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from pathlib import Path

from ..errors import Issue, SpecError
from ..scaffold import CODEOWNERS
from ..scaffold.choices import GITHUB_NAME, default_of
from ..scaffold.codeowners import fleet_teams, render_codeowners
from . import project_from

NAME = "codeowners"
HELP = "write .github/CODEOWNERS from the teams in models.yaml, or --check that it matches them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--models", default=None, help="catalogue file (default: <project>/models.yaml)")
    parser.add_argument("--org", default=os.environ.get("GITHUB_REPOSITORY_OWNER"),
                        help="GitHub organisation of the teams (default: $GITHUB_REPOSITORY_OWNER, set in workflows)")
    parser.add_argument("--platform-team", default=default_of("platform_team"),
                        help="team owning stacks/, .github/ and models without a team (default: %(default)s)")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 when the file differs")


def run(args: argparse.Namespace) -> int:
    if not args.org or not re.match(GITHUB_NAME, args.org):
        raise SpecError([Issue("modelfleet codeowners", 0, 0, "--org", f"no valid GitHub organisation ({args.org!r})",
                               "pass --org <organisation>, or run where $GITHUB_REPOSITORY_OWNER is set")])
    project = project_from(args)
    wanted = render_codeowners(fleet_teams(project.fleet()), args.org, args.platform_team)
    path = os.path.join(project.root, CODEOWNERS)
    current = Path(path).read_text(encoding="utf-8") if os.path.exists(path) else ""
    if not args.check:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(wanted)
        print(f"wrote {path}" if current != wanted else f"{path} already matches the teams")
        return 0
    if current == wanted:
        print(f"{path} matches the teams in {project.models_path}")
        return 0
    sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), wanted.splitlines(True), path, "wanted"))
    print(f"{path} does not match the teams in {project.models_path}: run `modelfleet codeowners --org {args.org}` "
          f"and commit it", file=sys.stderr)
    return 1
