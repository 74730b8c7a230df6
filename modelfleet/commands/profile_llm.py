"""``modelfleet profile --llm NAME``: TTFT and TPOT of one LLM with ``vllm bench serve``, locally or at ``--url``.

The load defaults to what the plan asks of one replica at peak: as many sequences in flight as it puts on a
replica (the plan's estimates.sequences_per_replica), so the plan can check the measurement at its own load.
Request shape: the SLA's (avg_input_tokens and avg_output_tokens, or their documented defaults), capped to
the served context. Locally the model is the tiny random Llama on the CPU build of vLLM (as
``modelfleet serve --llm`` runs it): the figures are that model's on this CPU (``measured_on: cpu``), which
exercises the loop end to end and says nothing about the real model on a GPU.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..engines.vllm_bench import LlmLoad, bench_arguments, run_bench
from ..errors import Issue, SpecError
from ..plan.compiler import models_in
from ..plan.types import FleetPlan, VllmModelPlan
from ..serve.vllm_local import TINY_CONTEXT
from .profile import measured_on
from .profile_yaml import llm_block

MIN_REQUESTS = 16  # fewer give no p99 worth writing down
BENCH_TIMEOUT_S = 1800.0


def _model(plan: FleetPlan, name: str) -> VllmModelPlan:
    model = next((m for m in plan.models if m.name == name and isinstance(m, VllmModelPlan)), None)
    if model is None:
        llms = [m.name for m in plan.models if isinstance(m, VllmModelPlan)]
        raise SpecError([Issue("--llm", 0, 0, "", f"no LLM {name!r} in stack {plan.environment}",
                               f"use one of: {', '.join(llms) or 'none'}")])
    return model


def load_for(plan: FleetPlan, model: VllmModelPlan, spec, args: argparse.Namespace, context: int) -> LlmLoad:
    """The offered load: as given, else the plan's per-replica load and the SLA's request shape (pure)."""
    # the sequences the plan puts on each replica at peak (its estimates), what a measurement is held to
    planned = model.estimates.sequences_per_replica if model.estimates else model.max_num_seqs
    concurrency = args.concurrency or planned
    inputs = args.input_tokens or spec.sla.input_tokens()
    outputs = args.output_tokens or spec.sla.output_tokens()
    inputs = min(inputs, context - outputs - 1) if inputs + outputs >= context else inputs
    return LlmLoad(concurrency, inputs, outputs, args.requests or max(MIN_REQUESTS, 4 * concurrency))


def measure_llm(plan: FleetPlan, args: argparse.Namespace, project, date: str, workdir: Path) -> dict[str, dict[str, Any]]:
    from .serve_llm import running_vllm, vllm_environment, vllm_python

    model = _model(plan, args.llm)
    spec = next(m for _, m in models_in(project.fleet(), plan.environment) if m.name == model.name)
    python = vllm_python(args.vllm_python, project.root)
    if python is None:
        raise SpecError([Issue("--llm", 0, 0, "", "vLLM is not installed (vllm bench serve comes with it)",
                               "bash scripts/setup-vllm.sh, or --vllm-python PATH")])
    where = measured_on(plan, model, args.measured_on, args.url, project)
    tp = 1 if args.url is None else (args.tensor_parallel or model.tensor_parallel_size)
    if args.url:
        tokenizer = args.tokenizer or model.artifact
        load = load_for(plan, model, spec, args, model.max_model_len)
        measurement = _bench(python, vllm_environment(), args.url.rstrip("/"), model.name, tokenizer, load, workdir)
        return {model.name: llm_block(measurement, load, where, date, tp)}
    with running_vllm(model, workdir, python) as (url, model_dir):
        load = load_for(plan, model, spec, args, min(model.max_model_len, TINY_CONTEXT))
        measurement = _bench(python, vllm_environment(), url, model.name, str(model_dir), load, workdir)
    return {model.name: llm_block(measurement, load, where, date, tp)}


def _bench(python: str, env: dict[str, str], url: str, name: str, tokenizer: str, load: LlmLoad, workdir: Path):
    print(f"vllm bench serve: {load.requests} requests of {load.input_tokens} tokens in, {load.output_tokens} out, "
          f"{load.concurrency} in flight, against {url}", flush=True)
    results = workdir / "bench"
    arguments = bench_arguments(url, name, tokenizer, load, results)
    measurement = run_bench(python, env, arguments, results, workdir / "bench.log", BENCH_TIMEOUT_S)
    print(f"  {measurement.completed} completed in {measurement.seconds} s: TTFT median {measurement.ttft_median_ms} "
          f"/ p99 {measurement.ttft_p99_ms} ms, TPOT median {measurement.tpot_median_ms} / p99 "
          f"{measurement.tpot_p99_ms} ms, {measurement.output_tokens_per_s} output tokens/s", flush=True)
    return measurement
