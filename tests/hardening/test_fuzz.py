"""Fuzzed input: random and mutated catalogues give a plan or our own located errors, never a traceback."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.hardening.fuzz_inputs import check_outcome, mutated_catalogues, values

import yaml


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=mutated_catalogues())
def test_mutated_catalogues_never_crash(text, catalogue):
    assert check_outcome(text, catalogue) in ("plan", "spec-error", "compile-error")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=values)
def test_random_documents_never_crash(document, catalogue):
    text = yaml.safe_dump({"models": document} if isinstance(document, list) else document, allow_unicode=True)
    assert check_outcome(text, catalogue) in ("plan", "spec-error", "compile-error")


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=300))
def test_arbitrary_text_never_crashes(text, catalogue):
    assert check_outcome(text, catalogue) in ("plan", "spec-error", "compile-error")
