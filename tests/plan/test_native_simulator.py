"""The scheduler simulation as the build compiles it (setup.py: mypyc) and as Python runs it give the same
figures to the bit, and a stale build never shadows an edited source (plan/llm/speed/__init__.py).

The battery below runs both ways: in this process (compiled where the build made it) and in a subprocess
with ``MODELFLEET_PURE_PYTHON=1`` (the Python modules); every result's ``repr`` (floats round-trip exactly)
must match. It covers each arrival process, every length distribution and a trace, closed loops over several
replicas, KV caches small enough to preempt, and token budgets that chunk prompts.
``MODELFLEET_REQUIRE_NATIVE=1`` (CI) makes a build that fell back to Python a failure."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from modelfleet.plan.llm import speed
from modelfleet.plan.llm.speed.calibration import load_performance_table
from modelfleet.plan.llm.speed.performance import Layout, shape_from_fields, step_timer
from modelfleet.plan.llm.speed.simulation import Lengths, Overloaded, Workload, simulate
from modelfleet.spec.presets import LLM_PRESETS
from tests.conftest import ROOT


def _lengths(rng: random.Random, mean: float) -> Lengths:
    kind = rng.choice(["fixed", "exponential", "lognormal", "histogram"])
    if kind == "histogram":
        return Lengths(distribution="histogram", maximum=4 * round(mean),
                       histogram=tuple((rng.randint(1, 3 * round(mean)), rng.random() + 0.1) for _ in range(4)))
    return Lengths(distribution=kind, mean=mean, cv=rng.uniform(0.3, 2.5) if kind == "lognormal" else 0.0,
                   maximum=round(mean * rng.uniform(2, 8)))


def _case(rng: random.Random) -> tuple[dict, str]:
    """One simulation's arguments (a float-heavy step time of the performance model's form) and its label."""
    prompt, answer = rng.uniform(50, 3000), rng.uniform(5, 600)
    arrivals = rng.choice(["poisson", "bursty", "closed", "trace"])
    common = dict(input=_lengths(rng, prompt), output=_lengths(rng, answer), max_context_tokens=8192)
    if arrivals == "closed":
        workload = Workload(arrivals="closed", users=rng.randint(1, 120), think_time_s=rng.choice([0.0, 0.5, 4.0]),
                            replicas=rng.randint(1, 7), **common)
    elif arrivals == "trace":
        rows = tuple((rng.randint(1, 4000), rng.randint(1, 500)) for _ in range(rng.randint(3, 40)))
        workload = Workload(arrivals="poisson", rate_per_s=rng.uniform(0.2, 8), trace=rows,
                            trace_gaps_s=tuple(rng.expovariate(1.0) for _ in rows), **common)
    else:
        workload = Workload(arrivals=arrivals, rate_per_s=rng.uniform(0.1, 12), cv=rng.uniform(0.4, 3.0), **common)
    a, b, c, d, e = (rng.uniform(0.5, 2) * x for x in (2.7, 0.021, 3e-6, 0.11, 4e-5))

    def step(prefill: int, context: float, decodes: int, decode_context: float) -> float:
        return a + b * prefill + c * prefill * context + d * decodes + e * decodes * decode_context
    if rng.random() < 0.5:  # the plan's own step time (steptime.StepTimer, compiled with the simulation)
        table = load_performance_table()
        shape = shape_from_fields(LLM_PRESETS[rng.choice(sorted(LLM_PRESETS))].fields)
        step = step_timer(table.gpus[rng.choice(sorted(table.gpus))], shape,
                          Layout(rng.choice([1, 2, 4, 8]), rng.choice([1, 2]), rng.random() < 0.5),
                          dispatch_ms=rng.uniform(0, 30), prefill=rng.uniform(0.7, 1.4), tpot=rng.uniform(0.7, 1.4))
    seqs = rng.randint(1, 160)
    kwargs = dict(step_ms=step, workload=workload, max_num_seqs=seqs,
                  max_num_batched_tokens=max(seqs, rng.choice([256, 512, 2048, 8192])),
                  kv_cache_tokens=rng.choice([9000, 40_000, 10**6]), requests=rng.randint(100, 400),
                  seed=rng.getrandbits(64))
    return kwargs, f"{arrivals}, {seqs} seqs, KV {kwargs['kv_cache_tokens']}"


def battery(cases: int = 40) -> list[str]:
    """Each case's result (or the error that ended it), as text."""
    rng, out = random.Random(2026), []
    for _ in range(cases):
        kwargs, label = _case(rng)
        try:
            out.append(f"{label}: {simulate(**kwargs)!r}")
        except (Overloaded, ValueError) as error:  # the same error either way
            out.append(f"{label}: {type(error).__name__}: {error}")
    return out


def _pure_env() -> dict[str, str]:
    return {**os.environ, "MODELFLEET_PURE_PYTHON": "1"}


def test_the_build_compiled_the_simulator_where_ci_requires_it():
    if os.environ.get("MODELFLEET_REQUIRE_NATIVE") != "1":
        pytest.skip("set MODELFLEET_REQUIRE_NATIVE=1 (CI does) to require the compiled simulator")
    assert speed.compiled(), "setup.py's mypyc build of the scheduler simulation did not happen or did not load"


def test_compiled_and_python_simulations_agree_to_the_bit():
    here = battery()
    code = "import json, tests.plan.test_native_simulator as t, modelfleet.plan.llm.speed as s; " \
           "print(json.dumps([s.compiled(), t.battery()]))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_pure_env(), capture_output=True, text=True,
                          check=True)
    compiled, there = json.loads(done.stdout)
    assert not compiled  # the subprocess ran the Python modules
    assert sum("preemptions=0," not in line for line in here) >= 5  # the KV cache's path is exercised
    assert sum("SimulationResult" in line for line in here) >= 20  # most cases ran to the end
    for mine, theirs in zip(here, there, strict=True):
        assert mine == theirs


def test_a_plan_is_byte_identical_either_way(tmp_path):
    """The whole prod plan (performance model, search, every simulation, the alternatives' forked workers)."""
    command = [sys.executable, "-m", "modelfleet", "plan", "--stack", "prod", "--json"]
    native = subprocess.run(command, cwd=ROOT, capture_output=True, check=True).stdout
    pure = subprocess.run(command, cwd=ROOT, env=_pure_env(), capture_output=True, check=True).stdout
    assert native == pure and b'"ttft_p99_ms"' in native


@pytest.mark.parametrize(("built", "pure", "expect"), [
    (None, None, "imported"),  # no native build: the imports find the Python modules
    ("current", None, "imported"),  # the build matches the sources: the compiled modules
    ("current", "1", "python"),
    ("stale", None, "python, with a warning"),
])
def test_which_modules_load(built, pure, expect):
    current = speed.sources_digest()
    digest = {None: None, "current": current, "stale": "0" * 64}[built]
    assert speed.choice(digest, current, pure) == expect


def test_the_digest_is_what_setup_records():
    stamp = Path(speed.__file__).parent / "_native_sources.py"
    if not stamp.exists():
        pytest.skip("no native build here (setup.py records the digest when it compiles)")
    assert f'DIGEST = "{speed.sources_digest()}"' in stamp.read_text()
