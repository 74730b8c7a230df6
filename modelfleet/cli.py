"""The ``modelfleet`` command line: a thin shell over the library.

Only modelfleet's own errors are caught: each issue is printed on one line to stderr and the exit code
is 2. Ctrl-C is one line and exit code 130, as a shell reports a process it interrupted, at any instant:
during start-up (imports) the package's own handler exits at once (modelfleet/__init__.py); while the command
runs it is a KeyboardInterrupt, so whatever the command was writing is left as it was (outputs are swapped in
whole or not at all); the line is written once, with Ctrl-C held back while it is, and the start-up handler,
silent by then, covers the interpreter's exit. Anything
else is a bug and keeps its traceback. Each subcommand lives in ``modelfleet/commands/``
as a module with NAME, HELP, ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import atexit
import importlib
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from . import INTERRUPTED
from .commands.version import installed_version
from .errors import EXIT_USER_ERROR, ModelfleetError

COMMANDS = ("init", "validate", "plan", "explore", "render", "schema", "serve", "client", "cost", "prices", "preview",
            "calibrate", "profile", "digest", "doctor", "codeowners", "stacks")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="modelfleet", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"modelfleet {installed_version()}")
    parser.add_argument("--project", default=".", help="project directory with models.yaml and stacks/ (default: .)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        module = importlib.import_module(f"modelfleet.commands.{name}")
        command = sub.add_parser(module.NAME, help=module.HELP, description=module.HELP)
        module.add_arguments(command)
        command.set_defaults(run=module.run)
    return parser


EXIT_INTERRUPTED = 128 + signal.SIGINT


def entry() -> NoReturn:
    """The installed ``modelfleet`` script: ``main``, then the process ends promptly (``python -m modelfleet``
    ends as Python does, for the tools that wrap it)."""
    exit_promptly(main())


def exit_promptly(code: int) -> NoReturn:
    """End the process as Python's exit would, less its last step. Python's exit waits for the other non-daemon
    threads (``threading._shutdown``, which also stops idle executor workers), runs the exit handlers
    (``atexit``: coverage's, multiprocessing's, temporary files'), then frees every object and module one by
    one. After a command on a large fleet that last step frees millions of objects (the plan, the manifests,
    the Pulumi SDK's outputs): 1.3 s after a 1,000-model preview, which the user waits for and nobody uses. So
    the first two steps run here as Python runs them, the streams are flushed, and ``os._exit`` ends the
    process. Where that cannot be done exactly (not the main thread, a stream that cannot be flushed, a Python
    without those two functions) or a tracer or profiler runs (it may act after the program returns), the
    ordinary exit runs instead."""
    wait_for_threads = getattr(threading, "_shutdown", None)
    run_handlers = getattr(atexit, "_run_exitfuncs", None)
    if (wait_for_threads is None or run_handlers is None or threading.current_thread() is not threading.main_thread()
            or sys.gettrace() is not None or sys.getprofile() is not None or not _flushed()):
        raise SystemExit(code)
    wait_for_threads()
    run_handlers()
    if not _flushed():  # a handler wrote and the stream has gone: as Python reports a failed final flush
        os._exit(120)
    os._exit(code)


def _flushed() -> bool:
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe (`| head`), a closed stream: Python's own exit reports it
        return False
    return True


def main(argv: Sequence[str] | None = None) -> int:
    previous = signal.getsignal(signal.SIGINT)  # the program's start-up handler, or a caller's
    INTERRUPTED.update(command="modelfleet", said=False)
    try:
        args = build_parser().parse_args(argv)
        INTERRUPTED["command"] = f"modelfleet {args.command}"
        _on_sigint(signal.default_int_handler)  # KeyboardInterrupt: the command's own cleanups run
        return _run(args)
    except KeyboardInterrupt:
        _on_sigint(previous)
        return _interrupted()
    finally:
        _on_sigint(previous)


def _on_sigint(handler: object) -> None:
    """Set the SIGINT handler where Python lets us: the main thread, and a handler Python installed."""
    if handler is not None and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, handler)


def _interrupted() -> int:
    """The one line, with Ctrl-C held back while it is written (a second one then exits without a second line)."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        print(f"{INTERRUPTED['command']}: interrupted", file=sys.stderr, flush=True)
        INTERRUPTED["said"] = True
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
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
