"""The Triton scheduling options of a classic model in models.yaml: priority classes, stateful (sequence)
models, streaming (decoupled) models, and the device (GPU or CPU) with its measured CPU profile.

Each maps onto one part of Triton's model configuration (docs/triton-features.md has the derivations):

* ``sla.priorities``   -> ``dynamic_batching.priority_levels``, ``default_priority_level`` and one
                          ``priority_queue_policy`` per level (its own queue timeout, from its own p99);
* ``stateful``         -> ``sequence_batching`` with the START, END, READY and CORRID control inputs;
* ``streaming: true``  -> ``model_transaction_policy { decoupled: true }`` (python backend only);
* ``device: cpu``      -> ``KIND_CPU`` instances on a CPU node group, sized by ``profile.cpu``.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from .tensors import Frozen
from .values import MAX_LATENCY_MS, MAX_PEAK_RPS, FieldProblem, quantity

# Triton numbers priority levels 1 (highest) .. priority_levels; more than a handful of classes cannot be told
# apart by a client or an operator, and every level is one more queue the scheduler scans.
MAX_PRIORITY_LEVELS = 8
# The sequence batcher keeps one slot per live sequence; beyond this, the state belongs in a store, not in
# model instances (each slot is a batch row of some instance).
MAX_SEQUENCES = 65_536
PRIORITY_NAME = r"^[a-z][a-z0-9_-]{0,31}$"
CPU_FAMILY = r"^[a-z][a-z0-9]*$"


class PrioritySpec(Frozen):
    """One priority class of a model's traffic (``sla.priorities: {interactive: {share: 0.8}, ...}``).

    The classes are ranked by their p99, tightest first: that one is Triton's level 1 (served first), since a
    lower class is only served when the higher queues are empty (and the order of a YAML mapping's keys
    carries no meaning). ``share`` is the class's part of ``sla.peak_rps``: each level's queue bound is sized
    from it. ``p99_latency_ms`` defaults to the model's own p99 and sets the level's queue timeout; two
    classes may not share a p99.
    """

    share: Annotated[float, Field(gt=0.0, le=1.0, description="this class's part of sla.peak_rps, above 0 and at "
                                                             "most 1; the shares of a model add up to 1")]
    p99_latency_ms: quantity(1, MAX_LATENCY_MS, "this class's p99 in milliseconds, 1 to 600,000; default: the "
                                                 "model's sla.p99_latency_ms", low_inclusive=True,
                              optional=True) = None


class StatefulSpec(Frozen):
    """A model that keeps state per sequence (a session, a stream of events): Triton's sequence batcher.

    Every request of a sequence carries its sequence id (CORRID) and goes to the same model instance slot;
    the model reads the START, END and READY flags as inputs of those names. A sequence idle for
    ``idle_timeout_ms`` is released (its slot freed; its next request must start it again).
    """

    idle_timeout_ms: quantity(1, 86_400_000, "how long a sequence may go without a request before Triton "
                                             "releases it, milliseconds, 1 to 86,400,000 (a day)",
                              low_inclusive=True, kind=int)
    max_sequences: quantity(1, MAX_SEQUENCES, "sequences live at once (each holds a slot), 1 to 65,536",
                            low_inclusive=True, kind=int)
    # direct: a sequence keeps one batch slot of one instance, so its state may live in that instance (the
    # usual choice for models that keep state in memory); oldest: every step of the oldest waiting
    # sequences is batched together, on any instance (state must travel with the request or a store).
    strategy: Literal["direct", "oldest"] = "direct"


class CpuProfileSpec(Frozen):
    """Measured figures of one model instance on a CPU (``KIND_CPU``), e.g. with perf_analyzer on a c7i node.

    They apply to the CPU families of the same processor as ``measured_on`` (instances.yaml says which);
    without them the compiler never chooses the CPU by itself, and ``device: cpu`` assumes and warns.
    """

    rps_per_instance: quantity(0.001, MAX_PEAK_RPS, "requests per second one CPU model instance sustains, "
                                                     "measured; 0.001 to 10,000,000", low_inclusive=True)
    compute_ms: quantity(0.01, MAX_LATENCY_MS, "p99 time of one full batch's execution on the CPU in "
                                                "milliseconds, 0.01 to 600,000", low_inclusive=True)
    measured_on: Annotated[str, Field(pattern=CPU_FAMILY, max_length=16, description="the CPU instance family "
                                      "the figures were taken on, e.g. c7i")] = "c7i"
    vcpu_per_instance: quantity(1, 64, "vCPUs one instance keeps busy (its intra-op threads), 1 to 64",
                                low_inclusive=True, kind=int) = 1


Device = Literal["gpu", "cpu"]


def check_priorities(priorities: dict[str, PrioritySpec] | None, p99_ms: float) -> None:
    """Shares add up to 1, at least two classes, names a client can carry, no two with the same p99."""
    if priorities is None:
        return
    if not 2 <= len(priorities) <= MAX_PRIORITY_LEVELS:
        raise FieldProblem(("priorities",), f"{len(priorities)} priority class(es): give 2 to {MAX_PRIORITY_LEVELS}",
                           "one class needs no priorities: drop sla.priorities")
    bad = [name for name in priorities if not re.match(PRIORITY_NAME, name)]
    if bad:
        raise FieldProblem(("priorities", bad[0]), f"priority class name {bad[0]!r} is not a short lowercase name",
                           "use lowercase letters, digits, '-' or '_', starting with a letter, at most 32 characters")
    total = sum(p.share for p in priorities.values())
    if abs(total - 1.0) > 1e-6:
        raise FieldProblem(("priorities",), f"the shares add up to {total:g}, not 1",
                           "give each class its part of sla.peak_rps, e.g. 0.8 and 0.2")
    by_p99: dict[float, str] = {}
    for name, level in priorities.items():
        p99 = level.p99_latency_ms or p99_ms
        if p99 in by_p99:
            raise FieldProblem(("priorities", name, "p99_latency_ms"),
                               f"{by_p99[p99]} and {name} both have a p99 of {p99:g} ms: classes are ranked by their "
                               "p99, tightest first", f"give the class to serve first a tighter p99_latency_ms "
                               f"(a class without one has the model's {p99_ms:g} ms)")
        by_p99[p99] = name


def ranked(priorities: dict[str, PrioritySpec], p99_ms: float) -> list[tuple[str, PrioritySpec, float]]:
    """(name, spec, p99) of each class, highest priority (tightest p99) first: Triton's levels 1, 2, ..."""
    return sorted(((n, s, s.p99_latency_ms or p99_ms) for n, s in priorities.items()), key=lambda item: item[2])


# Frameworks whose KIND_CPU instances the compiler can give their share of the node's cores: onnxruntime
# (intra_op_thread_count) and pytorch (INTRA_OP_THREAD_COUNT) take a per-model thread count; a python model
# runs one stub process per instance and uses the threads its model.py starts.
CPU_FRAMEWORKS = ("onnx", "pytorch", "python")
CPU_REFUSED = {
    "tensorrt": "a TensorRT plan runs on NVIDIA GPUs only",
    "tensorflow": "its backend takes no per-model thread count, so every instance would use all the node's cores "
                  "and the instances would contend for them",
    "openvino": "its backend takes no per-model thread count the compiler sets, so every instance would use all "
                "the node's cores and the instances would contend for them",
}
CONTROL_INPUTS = ("START", "END", "READY", "CORRID")  # the sequence batcher's control tensors, by these names


def check_model_options(model) -> None:  # a ClassicModelSpec (typed loosely: models.py imports this module)
    """Contradictions between the options, each located at the option that cannot hold."""
    cache = model.overrides.response_cache
    if model.streaming and model.framework != "python":
        raise FieldProblem(("streaming",), f"streaming needs the python backend; {model.framework} models answer "
                           "each request once", "drop streaming, or serve the model with framework: python")
    if model.streaming and model.stateful is not None:
        raise FieldProblem(("streaming",), "a model is either streaming or stateful here, not both",
                           "drop one of streaming and stateful")
    if (model.streaming or model.stateful is not None) and cache:
        what = "a streaming (decoupled) model" if model.streaming else "the sequence batcher"
        raise FieldProblem(("overrides", "response_cache"), f"Triton's response cache does not serve {what}",
                           "drop overrides.response_cache")
    if model.stateful is not None and model.sla.priorities:
        raise FieldProblem(("sla", "priorities"), "the sequence batcher has no priority levels (only the dynamic "
                           "batcher does)", "drop sla.priorities, or stateful")
    if model.stateful is not None:
        clash = sorted({t.name for t in model.inputs + model.outputs} & set(CONTROL_INPUTS))
        if clash:
            raise FieldProblem(("inputs",), f"{', '.join(clash)}: the sequence batcher's control inputs take these "
                               "names", "rename the model's tensor")
    if model.device == "cpu" and model.framework not in CPU_FRAMEWORKS:
        raise FieldProblem(("device",), f"a {model.framework} model cannot run on KIND_CPU instances here: "
                           + CPU_REFUSED[model.framework], "serve an ONNX export on the CPU (framework: onnx), or "
                           "drop device: cpu")
    if model.device == "cpu" and model.overrides.dedicated_gpu:
        raise FieldProblem(("overrides", "dedicated_gpu"), "device: cpu runs on CPU nodes, so it has no GPU to "
                           "dedicate", "drop overrides.dedicated_gpu or device: cpu")
