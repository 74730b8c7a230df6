"""Pipelines in models.yaml: named chains of the fleet's classic models, served as one Triton ensemble.

    pipelines:
      - name: image-classification
        inputs:  [{name: image_bytes, dtype: string, dims: [1]}]
        outputs: [{name: probabilities, dtype: fp32, dims: [1000], from: resnet50-classifier.probabilities}]
        steps:
          - model: image-preprocessor
            inputs: {image_bytes: image_bytes}                  # the model's input: a pipeline input...
          - model: resnet50-classifier
            inputs: {images: image-preprocessor.images}         # ...or <step model>.<its output>
        sla: {p99_latency_ms: 150, peak_rps: 100}

A step may also be an LLM of the file (served by vLLM): it reads one string, ``prompt``, and returns one,
``<llm>.text``; ``max_output_tokens`` caps its answer (default the LLM's ``sla.avg_output_tokens``). The
compiler calls it from the ensemble through a generated Triton python step (plan/triton/llm_steps.py).

The shapes here are what a person wrote (``*Spec``); :func:`pipeline_problems` checks them against the
models they name, collecting every problem with its path: unknown models (did you mean), inputs left
unmapped or mapped to nothing, dtype and dims mismatches, cycles, and tensors nobody uses (a pipeline input
no step reads, or a step output neither a later step nor the pipeline returns: Triton would compute it on
every request and throw it away), and steps disabled in a stack where the pipeline runs. The compiler
(plan/triton/pipelines.py) then keeps the members on one Triton server and splits the p99 across the steps;
docs/triton-features.md explains both.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any, Optional

from pydantic import Field

from .team import Team
from .tensors import LIST, Frozen, TensorSpec
from .values import MAX_LATENCY_MS, MAX_PEAK_RPS, MAX_VERSION, quantity

Problem = tuple[tuple[Any, ...], str, str]  # (path inside the document, message, fix)
DNS_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"
MAX_LLM_STEP_TOKENS = 131_072
LLM_INPUT, LLM_OUTPUT = "prompt", "text"  # an LLM step's tensors: the prompt in, the completion out


class PipelineOutputSpec(TensorSpec):
    """One output of the pipeline: a step's output under the name (and declared type) clients see."""

    from_: Annotated[str, Field(alias="from", min_length=1, max_length=256,
                                description="the step output it returns: <step model>.<output name>")]


class PipelineStepSpec(Frozen):
    model: Annotated[str, Field(pattern=DNS_LABEL, max_length=63, description="a classic model of this file")]
    # Each of the model's inputs -> a pipeline input's name, or <earlier step's model>.<its output>.
    inputs: Annotated[dict[str, str], Field(description="every input of the model, mapped to a pipeline input or "
                                                        "to <step model>.<output>")]
    # The version of the model the ensemble calls (its model_version). None: the one the model pins (version:),
    # or Triton's latest when it pins none; a model serving several (versions: [1, 2]) needs it said here.
    version: Annotated[Optional[int], Field(strict=True, gt=0, le=MAX_VERSION, description=(
        "the version of the model this step calls; default the model's pinned version (required when it serves "
        "several)"))] = None
    # An LLM step's answer length, sent as max_tokens; its p99 share is TTFT + (this - 1) x TPOT. None: the LLM's
    # sla.avg_output_tokens (what its plan predicts for). Only for an LLM step.
    max_output_tokens: Annotated[Optional[int], Field(strict=True, gt=0, le=MAX_LLM_STEP_TOKENS, description=(
        "an LLM step's max_tokens (1 to 131,072); default the LLM's sla.avg_output_tokens"))] = None


class PipelineSlaSpec(Frozen):
    p99_latency_ms: quantity(1, MAX_LATENCY_MS, "p99 of the whole pipeline inside Triton, milliseconds, 1 to "
                                                 "600,000; split across the steps", low_inclusive=True)
    peak_rps: quantity(0.001, MAX_PEAK_RPS, "pipeline requests per second at peak, 0.001 to 10,000,000; every "
                                             "step carries them on top of its own", low_inclusive=True)


class PipelineEnvironmentPatch(Frozen):
    """Per-stack changes: ``enabled: false`` leaves the pipeline out; ``sla`` is merged over its own."""

    enabled: bool = True
    sla: dict[str, Any] = Field(default_factory=dict)


class PipelineSpec(Frozen):
    """A chain of classic models served as one Triton ensemble, with an SLA of its own."""

    name: Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]
    inputs: Annotated[tuple[TensorSpec, ...], Field(**LIST, min_length=1, max_length=256)]
    outputs: Annotated[tuple[PipelineOutputSpec, ...], Field(**LIST, min_length=1, max_length=256)]
    steps: Annotated[tuple[PipelineStepSpec, ...], Field(**LIST, min_length=1, max_length=64)]
    sla: PipelineSlaSpec
    team: Team = None  # its owner, for people: an ensemble's cost and labels are its step models'
    environments: dict[str, PipelineEnvironmentPatch] = Field(default_factory=dict)

    def step_models(self) -> tuple[str, ...]:
        return tuple(step.model for step in self.steps)


# ---------------------------------------------------------------------------------------------- checks
def _close(name: str, known: list[str]) -> str:
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    return f"did you mean `{close[0]}`?" if close else f"use one of: {', '.join(sorted(known)) or '(none)'}"


def resolve(reference: str, inputs: dict[str, Any], steps: dict[str, Any]) -> tuple[str, str] | None:
    """A reference as (producer, tensor): ("", input) for a pipeline input, (model, output) for a step's
    output; None when it names neither. Model names have no dots, so the first dot splits a step's name."""
    if reference in inputs:
        return "", reference
    model, dot, tensor = reference.partition(".")
    if dot and model in steps and tensor in {t.name for t in steps[model].outputs}:
        return model, tensor
    return None


def compatible(source: Any, target: Any) -> bool:
    """Same dtype, same rank, and each dimension equal or variable (-1) on either side."""
    if source.dtype != target.dtype or len(source.dims) != len(target.dims):
        return False
    return all(a == b or -1 in (a, b) for a, b in zip(source.dims, target.dims))


def shape(tensor: Any) -> str:
    return f"{tensor.dtype} {list(tensor.dims)}"


def pipeline_problems(pipeline: PipelineSpec, index: int, models: dict[str, Any], taken: set[str]) -> list[Problem]:
    """Every problem of one pipeline against the fleet's ``models`` (name -> spec); ``taken``: names in use."""
    where = ("pipelines", index)
    problems: list[Problem] = []
    if pipeline.name in taken:
        problems.append((where + ("name",), f"{pipeline.name!r} is already the name of a model or pipeline: "
                         "Triton serves the pipeline as a model of that name", "give the pipeline its own name"))
    steps = _steps(pipeline, where, models, problems)
    inputs = {t.name: t for t in pipeline.inputs}
    used: set[tuple[str, str]] = set()
    edges: dict[str, set[str]] = {name: set() for name in steps}
    for j, step in enumerate(pipeline.steps):
        if step.model in steps:
            problems += _step_inputs(step, where + ("steps", j), inputs, steps, used, edges[step.model])
    for k, output in enumerate(pipeline.outputs):
        problems += _output(output, where + ("outputs", k), inputs, steps, used)
    problems += _cycle(pipeline, where, edges)
    problems += _unused(pipeline, where, inputs, steps, used)
    problems += _one_server(pipeline, where, steps)
    problems += _disabled_steps(pipeline, where, steps)
    return problems


def _disabled_steps(pipeline: PipelineSpec, where: tuple, steps: dict[str, Any]) -> list[Problem]:
    """A step disabled in a stack where the pipeline runs: the ensemble would call a model that is not there."""
    problems = []
    for j, step in enumerate(pipeline.steps):
        patches = getattr(steps.get(step.model), "environments", {})
        for env in sorted(e for e, patch in patches.items() if not patch.enabled):
            own = pipeline.environments.get(env)
            if own is None or own.enabled:
                problems.append((where + ("steps", j, "model"), f"{step.model} is disabled in stack {env}, where the "
                                 "pipeline runs: its ensemble would call a model that is not served there",
                                 f"disable the pipeline there too (environments: {{{env}: {{enabled: false}}}})"))
    return problems


def _one_server(pipeline: PipelineSpec, where: tuple, steps: dict[str, Any]) -> list[Problem]:
    """An ensemble calls its steps inside one tritonserver: they must be able to share one server (an LLM step
    is vLLM's, called over HTTP, so it is not counted); and it needs one classic step to run on."""
    classic = {n: m for n, m in steps.items() if not isinstance(m, LlmStepTensors)}
    if steps and not classic and len(steps) == len(pipeline.steps):
        return [(where + ("steps",), "every step is an LLM: the ensemble runs on its classic steps' Triton server, "
                 "and there is none", "call the LLM directly, or add a classic step (e.g. the prompt's preprocessing)")]
    steps = classic
    pools = sorted({m.pool or "" for m in steps.values()})
    if len(pools) > 1:
        named = ", ".join(f"{n} ({m.pool or 'no pool'})" for n, m in sorted(steps.items()))
        return [(where + ("steps",), f"the steps are in different pools: {named}; an ensemble runs its steps in "
                 "one Triton server", "give the steps the same pool, or none")]
    devices = sorted({m.device or "gpu" for m in steps.values()})
    if len(devices) > 1:
        return [(where + ("steps",), "some steps are device: cpu and some are not; an ensemble runs its steps in "
                 "one Triton server, on one kind of node", "set the same device on every step")]
    return []


@dataclass(frozen=True)
class LlmStepTensors:
    """An LLM as a pipeline step sees it: one string in (the prompt), one string out (the completion)."""

    name: str
    environments: dict[str, Any] = field(default_factory=dict)
    inputs: tuple[TensorSpec, ...] = (TensorSpec(name=LLM_INPUT, dtype="string", dims=(1,)),)
    outputs: tuple[TensorSpec, ...] = (TensorSpec(name=LLM_OUTPUT, dtype="string", dims=(1,)),)


def _llm_step(step: PipelineStepSpec, path: tuple, model: Any) -> list[Problem]:
    """An LLM step's own limits: its answer must fit the LLM's context."""
    context = model.sla.max_context_tokens
    if step.max_output_tokens is not None and step.max_output_tokens >= context:
        return [(path[:-1] + ("max_output_tokens",), f"{step.max_output_tokens} output tokens leave no room for a "
                 f"prompt in {step.model}'s max_context_tokens {context}", f"ask for fewer than {context}")]
    return []


def _steps(pipeline: PipelineSpec, where: tuple, models: dict[str, Any], problems: list[Problem]) -> dict[str, Any]:
    """The steps' model specs by name (an LLM's as :class:`LlmStepTensors`); unknown, repeated or unservable
    models are problems."""
    found: dict[str, Any] = {}
    known = sorted(models)
    for j, step in enumerate(pipeline.steps):
        path = where + ("steps", j, "model")
        model = models.get(step.model)
        if model is None:
            problems.append((path, f"no model named {step.model!r} in this file", _close(step.model, known)))
        elif step.model in found:
            problems.append((path, f"{step.model} is already a step of this pipeline", "use each model once"))
        elif model.type == "llm":
            problems.extend(_llm_step(step, path, model))
            if step.version is not None:
                problems.append((where + ("steps", j, "version"), f"{step.model} is an LLM: vLLM serves one "
                                 "version, the one its artifact pins", "remove the step's version"))
            found[step.model] = LlmStepTensors(step.model, dict(model.environments))
        elif step.max_output_tokens is not None:
            problems.append((where + ("steps", j, "max_output_tokens"), f"{step.model} is not an LLM: "
                             "max_output_tokens is an LLM step's", "remove it"))
        elif model.streaming or model.stateful is not None:
            kind = "streaming" if model.streaming else "stateful"
            problems.append((path, f"{step.model} is {kind}: an ensemble step answers each request once, without a "
                             "sequence", "use a model without streaming or stateful"))
        elif model.sla.priorities or model.overrides.dedicated_gpu:
            why = ("has sla.priorities: the pipeline's own requests would take one of its classes unseen" if
                   model.sla.priorities else "asks for a dedicated GPU, but a pipeline's steps share one server")
            problems.append((path, f"{step.model} {why}", "drop it from the model, or use another model as the step"))
        else:
            found[step.model] = model
            problems += _step_version(step, where + ("steps", j), model)
    return found


def step_versions(model: Any) -> tuple[int, ...] | None:
    """The versions a step's model serves: its pinned one, its versions, or None (Triton's latest)."""
    return (model.version.number,) if model.version is not None else model.versions


def _step_version(step: PipelineStepSpec, where: tuple, model: Any) -> list[Problem]:
    """An ensemble calls one version of each step: the one named, which the model must serve; none named, the
    model's only one (an ensemble must not silently take the newest of several)."""
    served = step_versions(model)
    if step.version is None:
        if served is not None and len(served) > 1:
            return [(where + ("model",), f"{step.model} serves versions {', '.join(map(str, served))}: the ensemble "
                     "would silently call the newest", f"name the one it calls: version: {served[-1]}")]
        return []
    if served is None:
        return [(where + ("version",), f"{step.model} pins no version: Triton serves only its latest folder, which "
                 f"need not be {step.version}", f"pin it on the model (version: {step.version}), or drop the step's "
                 "version")]
    if step.version not in served:
        return [(where + ("version",), f"{step.model} serves version(s) {', '.join(map(str, served))}, not "
                 f"{step.version}", f"use one of them, or serve {step.version} (versions: [...] on the model)")]
    return []


def _step_inputs(step: PipelineStepSpec, where: tuple, inputs: dict, steps: dict, used: set,
                 depends: set[str]) -> Iterator[Problem]:
    wanted = {t.name: t for t in steps[step.model].inputs}
    for name in sorted(set(wanted) - set(step.inputs)):
        yield (where + ("inputs",), f"{step.model}'s input {name} is not mapped",
               f"add `{name}: <pipeline input or step.output>` under inputs")
    for name, reference in step.inputs.items():
        path = where + ("inputs", name)
        if name not in wanted:
            yield (path, f"{step.model} has no input {name!r}", _close(name, sorted(wanted)))
            continue
        source = resolve(reference, inputs, steps)
        if source is None:
            yield (path, f"{reference!r} is neither an input of the pipeline nor <step model>.<output> of one of "
                   "its steps", _close(reference, sorted(inputs) + _outputs(steps)))
            continue
        used.add(source)
        if source[0]:
            depends.add(source[0])
        tensor = inputs[source[1]] if not source[0] else _tensor(steps[source[0]].outputs, source[1])
        if not compatible(tensor, wanted[name]):
            yield (path, f"{reference} is {shape(tensor)}, but {step.model}'s input {name} is {shape(wanted[name])}",
                   "map a tensor of the same dtype and dims (-1 matches any size)")


def _output(output: PipelineOutputSpec, path: tuple, inputs: dict, steps: dict, used: set) -> Iterator[Problem]:
    source = resolve(output.from_, {}, steps)
    if source is None:
        yield (path + ("from",), f"{output.from_!r} is not <step model>.<output> of one of the pipeline's steps",
               _close(output.from_, _outputs(steps)))
        return
    used.add(source)
    tensor = _tensor(steps[source[0]].outputs, source[1])
    if not compatible(tensor, output):
        yield (path, f"{output.name} is declared {shape(output)}, but {output.from_} is {shape(tensor)}",
               f"declare it as {shape(tensor)}")


def _cycle(pipeline: PipelineSpec, where: tuple, edges: dict[str, set[str]]) -> list[Problem]:
    """A step that (through others) needs its own output can never run: report the first cycle found."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(node: str, trail: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return trail[trail.index(nxt):] + [node, nxt] if nxt in trail else [node, nxt]
            if nxt not in state and (found := visit(nxt, trail + [node])):
                return found
        state[node] = 2
        return None

    for j, step in enumerate(pipeline.steps):
        if step.model in edges and step.model not in state and (loop := visit(step.model, [])):
            chain = " -> ".join(reversed(loop))
            return [(where + ("steps", j, "inputs"), f"the steps form a cycle: {chain} (each needs the next one's "
                     "output first)", "feed the first step from the pipeline's inputs")]
    return []


def _unused(pipeline: PipelineSpec, where: tuple, inputs: dict, steps: dict, used: set) -> Iterator[Problem]:
    for k, tensor in enumerate(pipeline.inputs):
        if ("", tensor.name) not in used:
            yield (where + ("inputs", k), f"pipeline input {tensor.name} is read by no step",
                   "map it to a step's input, or remove it")
    for j, step in enumerate(pipeline.steps):
        for tensor in steps[step.model].outputs if step.model in steps else ():
            if (step.model, tensor.name) not in used:
                yield (where + ("steps", j, "model"), f"{step.model}.{tensor.name} is used by no later step and is "
                       "not an output of the pipeline: computed on every request, then thrown away",
                       f"add it to the pipeline's outputs (from: {step.model}.{tensor.name}), or feed it to a step")


def _outputs(steps: dict[str, Any]) -> list[str]:
    return sorted(f"{name}.{t.name}" for name, model in steps.items() for t in model.outputs)


def _tensor(tensors: tuple, name: str) -> Any:
    return next(t for t in tensors if t.name == name)


def apply_pipeline_environment(pipeline: PipelineSpec, environment: str) -> PipelineSpec | None:
    """The pipeline as it runs in ``environment`` (its ``sla`` patch merged); None when disabled there.
    Raises pydantic.ValidationError when the merged SLA is invalid (the loader reports it with positions)."""
    patch = pipeline.environments.get(environment)
    if patch is None:
        return pipeline
    if not patch.enabled:
        return None
    if not patch.sla:
        return pipeline
    sla = PipelineSlaSpec.model_validate({**pipeline.sla.model_dump(), **patch.sla})
    return pipeline.model_copy(update={"sla": sla})
