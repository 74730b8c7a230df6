"""Random, mutated and valid-but-extreme catalogues for the fuzz test (CI) and bench/fuzz.py (a larger budget),
and the one outcome check both use.

Three sources, from far to near the compiler:

- ``st.text()`` and :data:`values`: arbitrary text and random documents (the parser's errors);
- :func:`mutated_catalogues`: the example with a few edits and raw text damage (the validator's errors);
- :func:`extreme_catalogues`: catalogues the schema accepts, drawn at the edges of every range (tiny and huge
  floats, integers past 10^30 where a field has no bound, unicode, unusual units), optionally with explicit
  YAML tags or out-of-range numbers written into a few values. These reach the compiler, the guardrails,
  render and the Kubernetes manifests.
"""

from __future__ import annotations

import copy
import resource
import signal
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from modelfleet.errors import CompileError, SpecError
from modelfleet.project import Project
from modelfleet.spec import values as B
from modelfleet.spec.models import CLASSIC_TYPES
from modelfleet.spec.presets import LLM_PRESETS

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = yaml.safe_load((ROOT / "models.yaml").read_text())
STACKS = ("dev", "staging", "prod")

weird_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-10**40, max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=40),
    st.sampled_from(["8B", "350M", "-1", "1e309", "no", "yes", "~", "0x1F", "1_000", "NaN", "ünï©ødé", "s3://", "fp8"]),
)
values = st.recursive(weird_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                             st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=12)


def _paths(node: Any, prefix: tuple = (), leaves_only: bool = False) -> list[tuple]:
    inner = isinstance(node, dict | list)
    out = [prefix] if prefix and not (leaves_only and inner) else []
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, prefix + (key,), leaves_only)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, prefix + (index,), leaves_only)
    return out


@st.composite
def mutated_catalogues(draw: st.DrawFn) -> str:
    """The example with a few edits: replaced values, deleted keys, new keys, or raw text damage."""
    data = copy.deepcopy(EXAMPLE)
    paths = _paths(data)
    for _ in range(draw(st.integers(1, 4))):
        path = draw(st.sampled_from(paths))
        parent = data
        try:
            for part in path[:-1]:
                parent = parent[part]
            action = draw(st.sampled_from(["replace", "delete", "add"]))
            if action == "replace":
                parent[path[-1]] = draw(values)
            elif action == "delete" and isinstance(parent, dict):
                del parent[path[-1]]
            elif isinstance(parent, dict):
                parent[draw(st.text(min_size=1, max_size=10))] = draw(values)
        except (KeyError, IndexError, TypeError):
            continue
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    damage = draw(st.sampled_from(["none", "none", "duplicate", "truncate", "insert", "deep"]))
    if damage == "duplicate":
        lines = text.splitlines()
        at = draw(st.integers(0, max(0, len(lines) - 1)))
        text = "\n".join(lines[: at + 1] + lines[at:at + 1] + lines[at + 1:]) + "\n"
    elif damage == "truncate":
        text = text[: draw(st.integers(0, len(text)))]
    elif damage == "insert":
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(["{", "]", ":", "\t", "&a ", "*a", "<<: *a\n", "\x00", "- "])) + text[at:]
    elif damage == "deep":
        text += "deep: " + "[" * 200 + "]" * 200 + "\n"
    return text


# --- valid catalogues at the edges of every range ----------------------------------------------------------

TINY = 5e-324  # the smallest positive float
HUGE_INT = 10**40


def _float(low: float, high: float, usual: tuple[float, float] = (1.0, 100.0)) -> st.SearchStrategy[float]:
    """A float in [low, high]: half the time a usual value (so that some catalogues compile and render),
    else an edge of the range or anything in it."""
    edges = [x for x in (low, high, 1e-6, 1e6) if low <= x <= high]
    usual_low, usual_high = max(low, usual[0]), min(high, usual[1])
    if usual_low > usual_high:
        usual_low, usual_high = low, high
    return st.one_of(st.floats(usual_low, usual_high), st.sampled_from(edges),
                     st.floats(low, high, allow_nan=False, allow_infinity=False))


def _int(low: int, high: int, usual: tuple[int, int] = (1, 64)) -> st.SearchStrategy[int]:
    usual_low, usual_high = max(low, usual[0]), min(high, usual[1])
    if usual_low > usual_high:
        usual_low, usual_high = low, high
    return st.one_of(st.integers(usual_low, usual_high), st.sampled_from(sorted({low, high})),
                     st.integers(low, high))


# The spec's own bounds (modelfleet/spec/values.py): every drawn value is one the schema accepts.
param_counts = st.one_of(_int(1, B.MAX_PARAMS), st.sampled_from(["350M", "8B", "1.5T", "0.001K", "70.6b", " 7 B ", "1"]),
                         _float(1.0, float(B.MAX_PARAMS)).map(float.__ceil__).map(float))
# Mostly URIs whose grant is exactly their prefix (so that catalogues compile), and one IAM would widen
# (refused: tests/hardening/test_iam_prefixes.py generates the rest).
s3_uris = st.sampled_from(["s3://bkt/m", "s3://acme-ml-models/triton/x.y_z=1-2", "s3://a.b-c/" + "x/" * 200,
                           "s3://models-01/m/", "s3://b0b/%20/?"])
tensor_names = st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_.:\-]{0,20}\Z")


@st.composite
def tensors(draw: st.DrawFn, prefix: str) -> list[dict[str, Any]]:
    count = draw(st.integers(1, 3))
    dims = st.lists(st.one_of(st.just(-1), _int(1, B.MAX_DIM)), min_size=1, max_size=8)
    dtype = st.sampled_from(["bool", "uint8", "int64", "fp16", "bf16", "fp32", "fp64", "string"])
    return [{"name": f"{prefix}{i}_{draw(tensor_names)}", "dtype": draw(dtype), "dims": draw(dims)}
            for i in range(count)]


@st.composite
def classic_models(draw: st.DrawFn, name: str) -> dict[str, Any]:
    size = draw(st.one_of(st.builds(lambda m: {"memory_gib": m}, _float(0.001, 4096.0, (0.1, 8.0))),
                          st.builds(lambda p, d: {"params": p, "dtype": d}, param_counts,
                                    st.sampled_from(["fp32", "fp16", "bf16", "fp8", "int8", "int4"]))))
    model: dict[str, Any] = {
        "name": name, "type": draw(st.sampled_from(CLASSIC_TYPES)),
        "framework": draw(st.sampled_from(["onnx", "tensorrt", "pytorch", "tensorflow", "openvino", "python"])),
        "artifact": draw(s3_uris), "size": size, "inputs": draw(tensors("in")), "outputs": draw(tensors("out")),
        "sla": {"p99_latency_ms": draw(_float(1.0, float(B.MAX_LATENCY_MS), (20.0, 2000.0))),
                "peak_rps": draw(_float(0.001, float(B.MAX_PEAK_RPS), (1.0, 500.0))),
                "availability": draw(_float(90.0, 99.99999999, (99.0, 99.9)))},
    }
    profile = draw(st.fixed_dictionaries({}, optional={
        "rps_per_instance": _float(0.001, float(B.MAX_PEAK_RPS), (100.0, 5000.0)),
        "compute_ms": _float(0.01, float(B.MAX_LATENCY_MS), (1.0, 50.0)), "gpu_memory_gib": _float(0.001, 1024.0, (0.1, 8.0)),
        "measured_on": st.sampled_from(["t4", "a10g", "l4", "l40s", "a100", "h100", "h200"])}))
    overrides = draw(st.fixed_dictionaries({}, optional={
        "max_batch_size": _int(0, 4096), "max_queue_delay_us": _int(0, 10_000_000),
        "queue_timeout_us": _int(1, 600_000_000), "max_queue_size": _int(1, 1_000_000),
        "instance_count": _int(1, 16), "replicas": _int(1, 1000), "dedicated_gpu": st.booleans()}))
    extra = draw(st.fixed_dictionaries({}, optional={
        "versions": st.lists(_int(1, B.MAX_VERSION), min_size=1, max_size=3), "team": st.text(max_size=20),
        "handles_cancellation": st.booleans()}))
    if "versions" not in extra:  # pinned, as prod requires (#15; unpinned models: tests/plan/test_day_two.py)
        extra["version"] = draw(st.one_of(_int(1, B.MAX_VERSION), st.builds(
            lambda n, h: {"number": n, "sha256": h}, _int(1, 1000), st.from_regex(r"\A[0-9a-f]{64}\Z"))))
    if draw(st.integers(0, 7)) == 0:
        extra["rollout"] = draw(rollouts)
    return model | ({"profile": profile} if profile else {}) | ({"overrides": overrides} if overrides else {}) | extra


# A rollout as models.yaml writes it (#15): rolling, or a canary with valid steps and pause.
rollouts = st.one_of(st.just({"strategy": "rolling"}), st.builds(
    lambda steps, pause: {"strategy": "canary", "steps": sorted(set(steps)) + [100], "pause": pause},
    st.lists(st.integers(1, 99), max_size=3), st.sampled_from(["1m", "90s", "10m", "1h"])))


@st.composite
def architectures(draw: st.DrawFn) -> tuple[str | dict[str, Any], int]:
    """A preset or custom architecture, and the attention heads tensor parallelism must divide."""
    if draw(st.booleans()):
        preset = draw(st.sampled_from(sorted(LLM_PRESETS)))
        return preset, LLM_PRESETS[preset].attention_heads
    kv_heads = draw(_int(1, 64))
    arch = {"layers": draw(_int(1, 1024)), "attention_heads": kv_heads * draw(_int(1, 1024 // kv_heads)),
            "kv_heads": kv_heads, "head_dim": draw(_int(1, 4096))}
    if draw(st.booleans()):
        arch["max_position_embeddings"] = draw(_int(2_097_152, B.MAX_POSITION_EMBEDDINGS))
    return arch, arch["attention_heads"]


@st.composite
def llm_models(draw: st.DrawFn, name: str) -> dict[str, Any]:
    arch, heads = draw(architectures())
    context = draw(_int(128, 2_097_152 if isinstance(arch, dict) else LLM_PRESETS[arch].max_position_embeddings,
                        (1024, 8192)))
    load = draw(st.one_of(st.builds(lambda n: {"peak_concurrent_sequences": n}, _int(1, 1_000_000)),
                          st.builds(lambda t: {"peak_output_tokens_per_s": t}, _float(TINY, float(B.MAX_OUTPUT_TOKENS_PER_S)))))
    sla = {"max_context_tokens": context, **load, "p99_ttft_ms": draw(_float(1.0, float(B.MAX_LATENCY_MS), (1000.0, 10_000.0))),
           "availability": draw(_float(90.0, 99.99999999, (99.0, 99.9)))}
    if draw(st.booleans()):
        sla["avg_context_tokens"] = draw(_int(1, context))
    size = {"dtype": draw(st.sampled_from(["fp32", "fp16", "bf16", "fp8", "int8", "int4"]))}
    if isinstance(arch, dict) or draw(st.booleans()):
        size["params"] = draw(param_counts)
    model = {"name": name, "type": "llm", "artifact": draw(st.sampled_from(["org/model", "s3://bkt/llm/u", "a/b.c-d_e"])),
             "size": size, "architecture": arch, "sla": sla,
             "profile": {"output_tokens_per_s_per_sequence": draw(_float(0.1, 10_000.0, (10.0, 60.0)))}}
    overrides = draw(st.fixed_dictionaries({}, optional={
        "tensor_parallel_size": st.sampled_from([t for t in (1, 2, 4, 8) if heads % t == 0]),
        "pipeline_parallel_size": _int(1, 16), "max_num_seqs": _int(1, 4096), "replicas": _int(1, 1000),
        "gpu_memory_utilization": _float(0.5, 0.98), "kv_cache_dtype": st.sampled_from(["auto", "fp8"]),
        "enable_prefix_caching": st.booleans(), "serving": st.just("vllm")}))
    serving = overrides.pop("serving", None)
    # pinned (#15): a Hub commit, or an s3:// sub-prefix
    model["revision"] = draw(st.from_regex(r"\A[0-9a-f]{40}\Z") if not model["artifact"].startswith("s3://")
                             else st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._=-]{0,20}\Z"))
    if draw(st.integers(0, 7)) == 0:
        model["rollout"] = draw(rollouts)
    return model | ({"serving": serving} if serving else {}) | ({"overrides": overrides} if overrides else {})


@st.composite
def valid_documents(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.from_regex(r"\A[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?\Z"), min_size=1, max_size=4, unique=True))
    models = [draw(llm_models(n) if draw(st.booleans()) else classic_models(n)) for n in names]
    for model in models:
        if draw(st.integers(0, 3)) == 0:
            model["environments"] = {draw(st.sampled_from(STACKS)): draw(st.one_of(
                st.just({"enabled": False}), st.just({"sla": {"availability": 99.0}}), st.just({}),
                st.just({"overrides": {"replicas": 1}})))}
    return {"models": models}


# Written into a value as they are (YAML text, not data): explicit tags and numbers past every bound.
TAGGED = ("!!int abc", "!!int 0x7FFFFFFFFFFFFFFFFFFFFFFF", "!!int 1_000", f"!!int {HUGE_INT}", "!!int -0",
          "!!float .inf", "!!float -.inf", "!!float .nan", "!!float 1.0e+400", "!!float 1e-400", "!!float abc",
          "!!str 123", "!!str", "!!bool yes", "!!bool maybe", "!!null ''", "!!null 7", "!!timestamp 2001-12-14",
          "!!binary aGVsbG8=", "!custom x", "!!python/name:os.system ''", "!!set {a, b}", "!!omap [a: 1]",
          "!!seq {a: 1}", "!!map [1]")
OUT_OF_RANGE = (".inf", "-.inf", ".nan", ".NaN", "1.0e+400", f"{HUGE_INT}", f"-{HUGE_INT}", f"{10**400}", "0",
                "-0.0", "1.0e-400")


@st.composite
def extreme_catalogues(draw: st.DrawFn, damage: tuple[str, ...] = TAGGED + OUT_OF_RANGE) -> str:
    """A valid catalogue at the edges of every range; with ``damage``, 0-2 of its values written as one of
    those YAML snippets instead (``damage=()``: always valid)."""
    document = draw(valid_documents())
    placeholders = {}
    if damage:
        leaves = _paths(document, leaves_only=True)
        for index in range(draw(st.integers(0, 2))):
            path = draw(st.sampled_from(leaves))
            parent = document
            for part in path[:-1]:
                parent = parent[part]
            placeholders[f"__DAMAGE{index}__"] = draw(st.sampled_from(damage))
            parent[path[-1]] = f"__DAMAGE{index}__"
    text = yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=10_000)
    for placeholder, snippet in placeholders.items():
        text = text.replace(placeholder, snippet)
    return text


# --- the outcome check ---------------------------------------------------------------------------------------


class Outcomes(Counter):
    """How many inputs ended how; the only outcomes there are."""

    KINDS = ("spec-error", "compile-error", "rendered")


_MODELS_FILE = Path(tempfile.mkdtemp(prefix="modelfleet-fuzz-")) / "models.yaml"
# An extreme LLM fleet (a million users, a 1-token head) is simulated up to 1,000 replicas on every layout before
# it is refused: 7.8 s alone here (measured), up to twice that beside a parallel test run. Past 60 s is a hang.
TIME_LIMIT_S = 60.0
MEMORY_LIMIT_BYTES = 4 * 2**30  # more address space than this for one catalogue is a memory bomb


class TooSlow(Exception):
    """An input that took longer than any catalogue should: a resource bug, reported with the input."""


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    def expire(signum: int, frame: object) -> None:
        raise TooSlow(f"no outcome within {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@contextmanager
def memory_limit(extra_bytes: int) -> Iterator[None]:
    """At most ``extra_bytes`` more address space while inside (MemoryError past it, instead of the OOM
    killer taking the whole test run); the previous soft limit is restored on the way out."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    used = next(int(line.split()[1]) * 1024 for line in Path("/proc/self/status").read_text().splitlines()
                if line.startswith("VmSize:"))
    limit = used + extra_bytes if hard == resource.RLIM_INFINITY else min(hard, used + extra_bytes)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def check_outcome(text: str) -> str:
    """:func:`outcome_of` within :data:`TIME_LIMIT_S` (TooSlow past it) and :data:`MEMORY_LIMIT_BYTES`."""
    with time_limit(TIME_LIMIT_S), memory_limit(MEMORY_LIMIT_BYTES):
        return outcome_of(text)


def outcome_of(text: str) -> str:
    """What ``modelfleet render`` does for every real stack, on ``text`` as models.yaml: parse and validate,
    compile with the stack's guardrails (policies, budget), price, render every artifact and the Kubernetes
    manifests. The only allowed outcomes: a render for the stack, or our own SpecError / CompileError whose
    every issue has a line. Returns "spec-error" (the catalogue is invalid), "rendered" (every stack
    rendered) or "compile-error" (at least one stack could not be satisfied)."""
    _MODELS_FILE.write_text(text, encoding="utf-8", errors="surrogatepass")
    project = Project(root=str(ROOT), models_file=str(_MODELS_FILE))
    try:
        project.fleet()
    except SpecError as error:
        _assert_located(error)
        return "spec-error"
    outcome = "rendered"
    for stack in STACKS:
        try:
            plan, files = project.rendered(stack)
        except CompileError as error:
            _assert_located(error)
            outcome = "compile-error"
            continue
        assert "plan.json" in files and any(k.startswith("kubernetes/") for k in files), sorted(files)
    return outcome


def _assert_located(error: SpecError | CompileError) -> None:
    assert error.issues, error
    for issue in error.issues:
        assert issue.line >= 1 and issue.file.endswith((".yaml", ".yml")), f"not located: {issue}"
