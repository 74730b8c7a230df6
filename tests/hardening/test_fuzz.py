"""Fuzzed input, from arbitrary text to valid catalogues at the edges of every range: for every real stack,
the only outcomes are a guarded plan with its render (every artifact and the Kubernetes manifests), or our
own SpecError / CompileError with a line. A crash with a listed known defect's signature is counted, not
failed (``known_defects.py``); each known defect's reproduction is a strict xfail below."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hardening.fuzz_inputs import Outcomes, check_outcome, extreme_catalogues, mutated_catalogues, values
from tests.hardening.known_defects import KNOWN_DEFECTS, known_defect


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def outcome(text: str) -> str:
    """check_outcome, with a known defect's crash counted as ``known:<id>``; any other crash propagates."""
    try:
        return check_outcome(text)
    except Exception as error:  # noqa: BLE001 - only a listed defect's exact signature is tolerated
        defect = known_defect(error)
        if defect is None:
            raise
        return f"known:{defect.id}"


@fuzz(80)
@given(text=extreme_catalogues(damage=()))
def test_valid_catalogues_at_the_edges_render_or_fail_located(text):
    outcome(text)


@fuzz(80)
@given(text=extreme_catalogues())
def test_extreme_catalogues_with_explicit_tags_and_out_of_range_numbers(text):
    outcome(text)


@fuzz(200)
@given(text=mutated_catalogues())
def test_mutated_catalogues_never_crash(text):
    outcome(text)


@fuzz(100)
@given(document=values)
def test_random_documents_never_crash(document):
    text = yaml.safe_dump({"models": document} if isinstance(document, list) else document, allow_unicode=True)
    outcome(text)


@fuzz(100)
@given(text=st.text(max_size=300))
def test_arbitrary_text_never_crashes(text):
    outcome(text)


def test_the_fuzzers_reach_render_compile_errors_and_spec_errors():
    """The generators reach every stage, not just the parser: a fixed draw of them (derandomized, so the same
    inputs every run, whatever ran before: this test once counted the other tests' outcomes and so passed only
    after them in file order, on the same xdist worker) renders some and fails others located."""
    seen = Outcomes()
    for strategy, examples in ((extreme_catalogues(damage=()), 150), (mutated_catalogues(), 15)):
        @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
                  suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
        @given(text=strategy)
        def draw(text: str) -> None:
            seen[outcome(text)] += 1
        draw()
    assert {"spec-error", "compile-error", "rendered"} <= set(seen), dict(seen)
    assert seen["rendered"] >= 10, dict(seen)


@pytest.mark.parametrize(("defect", "text"), [
    pytest.param(d, text, id=f"{d.id}-{i}", marks=pytest.mark.xfail(strict=True, reason=f"{d.owner}: {d.reason}"))
    for d in KNOWN_DEFECTS for i, text in enumerate(d.reproductions)])
def test_known_defect_reproductions(defect, text):
    """Each passes (and so fails as a strict xfail) once its defect is fixed: then delete the entry."""
    assert check_outcome(text) in Outcomes.KINDS


def test_a_load_no_replica_count_serves_fails_located():
    """Once known defect infinite-ttft-candidate (OverflowError in best_of): 63 million output tokens/s of a
    DeepSeek-R1 is a located compile error, not a traceback."""
    from tests.hardening.known_defects import INFINITE_TTFT
    assert check_outcome(INFINITE_TTFT) == "compile-error"


def test_fixed_cost_defects_render_or_fail_located():
    """Once known defects zero-rps-unit-cost and zero-gpu-share (ZeroDivisionError in cost.py): a 600 s model
    whose plan rounds rps_per_instance to 0 renders in dev and hits staging's and prod's maxGpusPerModel; two
    models whose gpu_share rounds to 0 on one GPU render everywhere (priced by GPU memory)."""
    from tests.hardening.known_defects import classic, classic_pair

    slow = classic(p99="600000", rps="1000", profile="", overrides="replicas: 144, max_batch_size: 1")
    assert check_outcome(slow) == "compile-error"
    assert check_outcome(classic_pair("0.001", "100000", "0.001")) == "rendered"


def test_a_located_error_and_a_render_are_the_only_outcomes():
    from tests.hardening.known_defects import classic, llm

    assert check_outcome(classic()) == "rendered"
    assert check_outcome(llm()) == "rendered"
    assert check_outcome(classic(rps="-1")) == "spec-error"
    assert check_outcome(classic(p99="0.001")) == "spec-error"  # below the 1 ms bound of p99_latency_ms
    assert check_outcome(classic(p99="1")) == "compile-error"  # 5 ms of compute leave no queueing budget
