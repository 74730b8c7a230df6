from __future__ import annotations

import argparse
import os
import sys
import tempfile

from ..clientgen import render_client
from . import add_project_arguments, print_warnings, project_from

NAME = "client"
HELP = "generate a minimal typed Python client module for a stack's Triton models (stdout or --out FILE)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_project_arguments(parser)
    parser.add_argument("--out", default=None, metavar="FILE", help="write the module here (default: stdout)")


def run(args: argparse.Namespace) -> int:
    plan = project_from(args).plan(args.stack)
    source = render_client(plan)
    print_warnings(plan)
    if args.out is None:
        sys.stdout.write(source)
        return 0
    write_file(args.out, source)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def write_file(path: str, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a reader never sees half a module."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(dir=directory, prefix=".client-", suffix=".py")
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
