"""LLM steps of pipelines: their share of the pipeline's p99, and the python step that calls vLLM from the ensemble.

An LLM step is served by vLLM, not by Triton. The ensemble reaches it through a generated Triton python model
(render/llm_step.py) on the pipeline's server, which sends the prompt to the LLM's Service (OpenAI
``/v1/completions``) and returns the text. The split:

    share (ms)   = p99 TTFT + (max_output_tokens - 1) x TPOT      the LLM plan's predictions at its peak
    classic p99  = pipeline p99 - sum(LLM shares)                  split across the classic steps as before

Why the LLM's share is taken first and whole: its time is set by vLLM's own plan (a replica's TTFT and TPOT at
the LLM's peak), which the Triton sizing cannot shrink; the classic steps split what is left in proportion to
their compute (plan/triton/pipelines.py). The python step times out at its share (``timeout_ms``): an LLM that
answers later fails the request instead of making the whole pipeline late. TPOT is the predicted p99 where the
simulation gives one (else the mean with the peak's sequences running), so the share is a p99 too.

Instances: each python instance waits on one HTTP call at a time, so it needs as many as the pipeline's peak
keeps in flight at this step (Little's law, peak_rps x share), capped at MAX_INSTANCES (a warning says so).
Each is a python stub with its shared-memory arena, so the server's python_shm_bytes, its shm flag and its
memory request count them as they count the classic python models' (:func:`with_llm_step_memory`).
"""

from __future__ import annotations

import math

from ...errors import Issue
from ...spec.models import DEFAULT_OUTPUT_TOKENS
from ...spec.pipelines import PipelineSpec
from ..serving.engine_args import VLLM_PORT
from ..types import (Decision, PipelineLlmStepPlan, PipelinePlan, PipelineStepPlan, TritonServerPlan,
                     VllmModelPlan, Warning_)
from .packing.gpu import PYTHON_SHM_BYTES
from .pipelines import run_order, tensor_of

MAX_INSTANCES = 64  # python stub processes per step on one server: each is a process of its own (tens of MB)


def llm_step_name(pipeline: str, llm: str) -> str:
    """The python step's Triton model name; model and pipeline names are DNS labels, so the dot never collides."""
    return f"{pipeline}.{llm}"


def llm_url(llm: str, namespace: str, port: int = VLLM_PORT) -> str:
    """The LLM's Service in the stack's namespace (render/k8s/vllm.py names it after the model)."""
    return f"http://{llm}.{namespace}.svc:{port}/v1/completions"


def predicted_ms(llm: VllmModelPlan) -> tuple[float, float]:
    """(p99 TTFT, TPOT) the LLM's plan predicts at its peak."""
    estimates = llm.estimates
    if estimates is None:
        return llm.estimated_ttft_ms, llm.tpot_ms
    return estimates.ttft_p99_ms, estimates.tpot_p99_ms or estimates.tpot_ms


def output_tokens(pipeline: PipelineSpec, llm: VllmModelPlan) -> int:
    """The step's max_output_tokens, else the length the LLM's plan predicts for (its sla.avg_output_tokens)."""
    step = next(s for s in pipeline.steps if s.model == llm.name)
    if step.max_output_tokens is not None:
        return step.max_output_tokens
    return llm.estimates.output_tokens if llm.estimates is not None else DEFAULT_OUTPUT_TOKENS


def llm_step_plan(pipeline: PipelineSpec, llm: VllmModelPlan, namespace: str) -> PipelineLlmStepPlan:
    ttft, tpot = predicted_ms(llm)
    tokens = output_tokens(pipeline, llm)
    share = math.ceil(ttft + (tokens - 1) * tpot)
    in_flight = math.ceil(pipeline.sla.peak_rps * share / 1000)
    return PipelineLlmStepPlan(name=llm_step_name(pipeline.name, llm.name), llm=llm.name,
                               url=llm_url(llm.name, namespace), max_output_tokens=tokens, ttft_p99_ms=ttft,
                               tpot_ms=tpot, timeout_ms=share, instances=max(1, min(MAX_INSTANCES, in_flight)))


def split_llm_steps(index: int, pipeline: PipelineSpec, llms: dict[str, VllmModelPlan], namespace: str,
                    issues: list[Issue]) -> tuple[PipelineSpec, tuple[PipelineLlmStepPlan, ...]] | None:
    """(the pipeline as the classic compile sees it: its LLM steps out and their shares off its p99, the LLM
    steps' plans); None, with an issue, when the LLMs alone take the whole p99."""
    steps = tuple(llm_step_plan(pipeline, llms[s.model], namespace) for s in pipeline.steps if s.model in llms)
    if not steps:
        return pipeline, ()
    taken = sum(s.timeout_ms for s in steps)
    left = pipeline.sla.p99_latency_ms - taken
    if left <= 0:
        parts = ", ".join(f"{s.llm} {s.timeout_ms} ms (p99 TTFT {s.ttft_p99_ms:g} + ({s.max_output_tokens} - 1) x "
                          f"TPOT {s.tpot_ms:g})" for s in steps)
        issues.append(Issue("", 0, 0, f"pipelines[{index}].sla.p99_latency_ms", f"{pipeline.name}: p99 "
                            f"{pipeline.sla.p99_latency_ms:g} ms is less than its LLM step(s) take alone: {parts}, "
                            "leaving nothing for the classic steps", f"raise it above {taken} ms, or lower the "
                            "steps' max_output_tokens, or tighten the LLM's own sla (p99_ttft_ms, p99_tpot_ms)"))
        return None
    classic = tuple(s for s in pipeline.steps if s.model not in llms)
    sla = pipeline.sla.model_copy(update={"p99_latency_ms": left})
    return pipeline.model_copy(update={"steps": classic, "sla": sla}), steps


def with_llm_steps(plan: PipelinePlan, pipeline: PipelineSpec, steps: tuple[PipelineLlmStepPlan, ...],
                   warnings: list[Warning_]) -> PipelinePlan:
    """The classic ensemble with its LLM steps put back (in an order that runs) and its whole p99 restored."""
    if not steps:
        return plan
    by_llm = {s.llm: s for s in steps}
    classic = {s.model: s for s in plan.steps}
    added = {s.llm: PipelineStepPlan(
        model=s.name, input_map=(("prompt", tensor_of(pipeline, _prompt(pipeline, s.llm))),),
        output_map=(("text", tensor_of(pipeline, f"{s.llm}.text")),), budget_ms=float(s.timeout_ms),
        queue_timeout_us=0, model_version=1) for s in steps}
    ordered = tuple(added[m] if m in by_llm else classic[m] for m in run_order(pipeline))
    for s in steps:
        if s.instances == MAX_INSTANCES:
            warnings.append(Warning_(model=plan.name, message=f"LLM step {s.llm}: {MAX_INSTANCES} python instances "
                                     f"(the cap) are fewer than the {plan.peak_rps:g} req/s peak keeps in flight "
                                     f"over {s.timeout_ms} ms: requests queue in Triton before it"))
    return plan.model_copy(update={"steps": ordered, "llm_steps": steps, "p99_latency_ms": pipeline.sla.p99_latency_ms,
                                   "decisions": plan.decisions + (llm_decision(pipeline, steps),)})


def _prompt(pipeline: PipelineSpec, llm: str) -> str:
    return next(s for s in pipeline.steps if s.model == llm).inputs["prompt"]


def llm_decision(pipeline: PipelineSpec, steps: tuple[PipelineLlmStepPlan, ...]) -> Decision:
    taken = sum(s.timeout_ms for s in steps)
    parts = "; ".join(f"{s.llm} {s.timeout_ms} ms = p99 TTFT {s.ttft_p99_ms:g} + ({s.max_output_tokens} - 1) x "
                      f"TPOT {s.tpot_ms:g} ms, called at {s.url} by the python step {s.name} ({s.instances} "
                      "instance(s)), which fails the request at that timeout" for s in steps)
    return Decision(choice=f"LLM steps {taken} ms of p99 {pipeline.sla.p99_latency_ms:g} ms",
                    reason=f"an LLM step's share is what its vLLM plan predicts for the declared output length: "
                           f"{parts}; the classic steps split the remaining "
                           f"{pipeline.sla.p99_latency_ms - taken:g} ms")


def with_llm_step_memory(servers: list[TritonServerPlan], pipelines: list[PipelinePlan]) -> list[TritonServerPlan]:
    """Each server with its pipelines' LLM step instances counted: their shared-memory arenas in
    python_shm_bytes and the memory request, and the arena flag where no classic python model set it."""
    extra: dict[str, int] = {}
    for pipeline in pipelines:
        for step in pipeline.llm_steps:
            extra[pipeline.server] = extra.get(pipeline.server, 0) + PYTHON_SHM_BYTES * step.instances
    return [_with_arenas(s, extra[s.name]) if s.name in extra else s for s in servers]


def _with_arenas(server: TritonServerPlan, shm: int) -> TritonServerPlan:
    args = server.args
    flag = f"--backend-config=python,shm-default-byte-size={PYTHON_SHM_BYTES}"
    if flag not in args:  # where triton_server_args puts it: after the metrics switch and the cache flag
        at = args.index("--allow-metrics=true") + 1
        at += 1 if at < len(args) and args[at].startswith("--cache-config=") else 0
        args = args[:at] + (flag,) + args[at:]
    return server.model_copy(update={"python_shm_bytes": server.python_shm_bytes + shm, "args": args,
                                     "memory_request_gib": round(server.memory_request_gib + shm / 1024**3, 2)})
