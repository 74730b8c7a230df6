"""The profile: language: measured blocks validate as wholes, dates are dates, old catalogues still load."""

from __future__ import annotations

import textwrap

import pytest

from modelfleet.errors import SpecError
from modelfleet.spec.load import parse_fleet_text
from modelfleet.spec.profiles import LLM_MEASURED, ClassicProfileSpec, LlmProfileSpec

CHAT = textwrap.dedent("""\
    models:
      - name: chat
        type: llm
        artifact: org/model
        size: {{dtype: bf16}}
        architecture: llama-3.1-8b
        sla: {{max_context_tokens: 4096, peak_concurrent_sequences: 8, p99_ttft_ms: 2000}}
        profile:
    {profile}""")
MEASURED = {"measured_on": "h100", "measured_at": "2026-01-02", "tensor_parallel": 1, "concurrency": 8,
            "input_tokens": 1024, "output_tokens": 256, "ttft_median_ms": 80.0, "ttft_p99_ms": 150.0,
            "tpot_median_ms": 7.0, "tpot_p99_ms": 9.5, "output_tokens_per_s": 1100.0}


def profile_text(values: dict) -> str:
    return "".join(f"      {k}: {v}\n" for k, v in values.items())


def issues(text: str) -> list:
    with pytest.raises(SpecError) as caught:
        parse_fleet_text(text)
    return list(caught.value.issues)


def test_a_whole_llm_measurement_loads_with_its_default_decode_speed():
    profile = parse_fleet_text(CHAT.format(profile=profile_text(MEASURED))).models[0].profile
    assert profile.measured and profile.ttft_p99_ms == 150.0 and profile.output_tokens_per_s_per_sequence == 30.0
    assert tuple(MEASURED) == LLM_MEASURED  # the field order the other helpers rely on


def test_a_partial_llm_measurement_names_what_is_missing():
    partial = {k: v for k, v in MEASURED.items() if k not in ("tpot_p99_ms", "concurrency")}
    (issue,) = issues(CHAT.format(profile=profile_text(partial)))
    assert issue.path == "models[0].profile.concurrency" and "missing concurrency, tpot_p99_ms" in issue.message


def test_a_p99_below_its_median_is_refused():
    (issue,) = issues(CHAT.format(profile=profile_text({**MEASURED, "tpot_p99_ms": 5.0})))
    assert issue.path == "models[0].profile.tpot_p99_ms" and "below tpot_median_ms" in issue.message


def test_dates_must_be_real_days():
    assert ClassicProfileSpec(measured_at="2026-02-28").measured_at == "2026-02-28"
    with pytest.raises(ValueError, match="is not a date"):
        ClassicProfileSpec(measured_at="2026-02-30")
    with pytest.raises(ValueError):
        LlmProfileSpec.model_validate({**MEASURED, "measured_at": "yesterday"})


def test_batches_are_ascending_and_distinct():
    rows = [{"batch_size": 4, "throughput_rps": 10.0, "p99_ms": 2.0}, {"batch_size": 1, "throughput_rps": 5.0,
                                                                       "p99_ms": 1.0}]
    with pytest.raises(ValueError, match="not ascending and distinct"):
        ClassicProfileSpec.model_validate({"batches": rows})
    assert ClassicProfileSpec.model_validate({"batches": rows[::-1], "measured_on": "cpu"}).measured


def test_the_example_catalogue_still_loads(project):
    fleet = project.fleet()
    assert all(not m.profile.measured for m in fleet.models if m.type == "llm")
    assert all(m.profile.measured_on == "a10g" and m.profile.batches == () for m in fleet.models if m.type != "llm")
