"""An LLM's measured profile in the plan: reported always; where it applies (GPU and tensor parallel of the
plan), a miss at no more than the plan's load per replica is a CompileError, at more a warning."""

from __future__ import annotations

import textwrap

import pytest

from modelfleet.commands.plan import format_plan
from modelfleet.errors import CompileError
from tests.test_compile_cases import compile_text

# On prod the 8B, with the measurement's 1,024 in / 256 out and a p99 TPOT of 30 ms, is planned on one L40S
# (g6e.xlarge), 19 sequences per replica at most (max_num_seqs), and 48 at peak over 3 replicas: 16 per replica.
CHAT = textwrap.dedent("""\
    models:
      - name: chat
        type: llm
        artifact: meta-llama/Llama-3.1-8B-Instruct
        size: {{dtype: bf16}}
        architecture: llama-3.1-8b
        sla: {{max_context_tokens: 8192, avg_input_tokens: 1024, avg_output_tokens: 256, peak_concurrent_sequences: 48,
              p99_ttft_ms: 1500, p99_tpot_ms: 30}}
        profile:
          measured_on: {on}
          measured_at: "2026-01-02"
          tensor_parallel: 1
          concurrency: {concurrency}
          input_tokens: 1024
          output_tokens: 256
          ttft_median_ms: 300
          ttft_p99_ms: {ttft}
          tpot_median_ms: 20
          tpot_p99_ms: 25
          output_tokens_per_s: 700
    """)


def plan(on="l40s", concurrency=16, ttft=900):
    return compile_text(CHAT.format(on=on, concurrency=concurrency, ttft=ttft))


def test_the_layout_the_test_relies_on():
    chat = plan().model("chat")
    assert (chat.instance_type, chat.tensor_parallel_size, chat.replicas) == ("g6e.xlarge", 1, 3)


def test_a_measurement_on_the_plans_gpu_that_meets_the_sla_is_reported():
    p = plan()
    measured = p.model("chat").measured
    assert measured.applies and measured.ttft_p99_ms == 900
    assert measured.verdict == "meets the SLA at 16 sequences in flight, at least the 16 the plan puts on each replica at peak"
    assert ("measured (l40s tp=1, 2026-01-02; 16 sequences, 1024 in / 256 out): TTFT median 300 / p99 900 ms, TPOT "
            "median 20 / p99 25 ms, 700 tokens/s; meets the SLA") in format_plan(p)


def test_a_miss_at_no_more_than_the_plans_load_is_an_error():
    with pytest.raises(CompileError) as caught:
        plan(concurrency=8, ttft=1800)
    (issue,) = caught.value.issues
    assert issue.path == "models[0].profile"
    assert issue.message == ("chat: measured on l40s tp=1 at 8 sequences in flight, no more than the 16 the plan puts "
                             "on each replica at peak, it misses the SLA: p99 TTFT 1800 ms > SLA 1500 ms")
    assert issue.fix.startswith("raise the SLA to the measured figures, or give the model a faster layout")


def test_a_miss_at_more_than_the_plans_load_is_a_warning():
    p = plan(concurrency=32, ttft=1800)
    assert "not conclusive" in p.model("chat").measured.verdict
    (warning,) = [w.message for w in p.warnings if "re-measure" in w.message]
    assert warning.endswith("at the plan's load it may not: re-measure at --concurrency 16")


def test_a_measurement_elsewhere_is_reported_not_checked():
    p = plan(on="cpu", ttft=99999)
    measured = p.model("chat").measured
    assert not measured.applies
    assert measured.verdict == ("measured on cpu tp=1, not on this plan's l40s tp=1 pp=1: reported, not checked "
                                "against the SLA")


def test_a_meet_at_a_lighter_load_is_no_proof():
    verdict = plan(concurrency=4).model("chat").measured.verdict
    assert verdict.endswith("fewer than the 16 the plan puts on each replica at peak (no proof at peak: re-measure "
                            "at --concurrency 16)")
