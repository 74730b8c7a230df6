"""The ``modelfleet`` command line: a thin shell over the library.

Only modelfleet's own errors are caught: each issue is printed on one line to stderr and the exit code
is 2. Ctrl-C (KeyboardInterrupt) is one line and exit code 130, as a shell reports a process it interrupted;
whatever the command was writing is left as it was (outputs are swapped in whole or not at all). Anything
else is a bug and keeps its traceback. Each subcommand lives in ``modelfleet/commands/``
as a module with NAME, HELP, ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Sequence

from .errors import EXIT_USER_ERROR, ModelfleetError

COMMANDS = ("validate", "plan", "explore", "render", "schema", "serve", "client", "cost", "prices", "preview", "calibrate", "profile",
            "digest")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="modelfleet", description=__doc__.splitlines()[0])
    parser.add_argument("--project", default=".", help="project directory with models.yaml and stacks/ (default: .)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"modelfleet.commands.{name}")
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


EXIT_INTERRUPTED = 128 + signal.SIGINT


def main(argv: Sequence[str] | None = None) -> int:
    command = "modelfleet"
    try:
        args = build_parser().parse_args(argv)
        command = f"modelfleet {args.command}"
        return _run(args)
    except KeyboardInterrupt:
        print(f"{command}: interrupted", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED


def _run(args: argparse.Namespace) -> int:
    try:
        return int(args.run(args))
    except ModelfleetError as exc:
        kind = type(exc).__name__
        for issue in exc.issues:
            print(f"{issue}", file=sys.stderr)
        print(f"{kind}: {len(exc.issues)} problem(s); nothing was written", file=sys.stderr)
        return EXIT_USER_ERROR
