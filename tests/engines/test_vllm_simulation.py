"""The plan's scheduler simulation against a REAL vLLM (CPU build): a step model calibrated from single-request
``vllm bench serve`` figures, the simulator's p50/p99 TTFT and TPOT for Poisson runs at 30/70/90% of the
simulated capacity, and ``vllm bench serve --request-rate R`` runs of the same lengths, within
simulation_check.TOLERANCE (its reasons there; the spread it rests on: bench/vllm_cpu_simulation.md).

Runs where vLLM is importable by this interpreter (.ci/run's vLLM step). About five minutes: vLLM starts in
1-2 minutes (the heavier random Llama compiles), calibration is four benchmark runs, and the three loads
take about two more.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from modelfleet.engines import simulation_check as check
from tests.engines import vllm_simulation_run as run
from tests.engines.local_vllm import require_vllm

pytestmark = pytest.mark.engine("vllm")

require_vllm()

SEED = 1


def test_simulated_latencies_match_a_real_vllm(tmp_path: Path) -> None:
    started = time.monotonic()
    with run.engine(tmp_path) as (url, tokenizer, kv_cache_tokens):
        spec = run.setup(kv_cache_tokens)
        result = run.run_check(url, tokenizer, spec, tmp_path, SEED)
    seconds = time.monotonic() - started
    fit = result.fit
    print(f"took {seconds:.0f} s; capacity {result.capacity_per_s:.2f}/s; fit error median "
          f"{fit.median_abs_error():.1%}, worst {fit.max_abs_error():.1%}")
    for load in result.loads:
        print(f"{load.fraction:.0%} ({load.rate_per_s:.2f}/s): predicted {load.predicted}, measured {load.measured}")

    assert fit.max_abs_error() <= check.FIT_TOLERANCE, [(o, f) for o, f in fit.points]
    missed = {f"{load.fraction:.0%}": check.misses(load.predicted, load.measured) for load in result.loads}
    assert not any(missed.values()), missed
