"""An LLM's measured profile in the plan: measured on a GPU, it corrects the prediction (the factors that make
the model reproduce the measurement at its own point), so the plan sizes for what was measured; reported
always; where it applies (GPU and tensor parallel of the plan), a miss at no more than the plan's load per
replica is a CompileError, at more a warning."""

from __future__ import annotations

import textwrap

import pytest

from modelfleet.plan.llm.speed.peak import SIMULATION_SOURCE
from modelfleet.commands.plan import format_plan
from modelfleet.errors import CompileError
from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.plan.llm.search import measured_correction
from modelfleet.plan.llm.shape import model_shape
from modelfleet.plan.llm.speed.load import Speed, p99_wait_ms
from modelfleet.plan.llm.speed.performance import Layout
from modelfleet.plan.llm.speed.calibration import gpu_for
from modelfleet.plan.llm.precision import precision_on
from modelfleet.spec.load import parse_fleet_text
from tests.test_compile_cases import PROD, compile_text

# On prod the 8B, with 1,024 in / 256 out and a p99 TPOT of 30 ms, is planned on one L40S (g6e.xlarge) at
# 6 replicas for the 48 users at peak (simulated: routed at random, fewer replicas queue some for a
# max_num_seqs slot past the p99 TTFT). The measurement below (16 in flight: TTFT p99 900 ms, TPOT median
# 20 ms) corrects prompts up (x1.59) and decode down (x0.72): still 6 replicas, 8 sequences each.
CHAT = textwrap.dedent("""\
    models:
      - name: chat
        type: llm
        artifact: meta-llama/Llama-3.1-8B-Instruct
        size: {{dtype: bf16}}
        architecture: llama-3.1-8b
        sla: {{max_context_tokens: 8192, avg_input_tokens: 1024, avg_output_tokens: 256, peak_concurrent_sequences: 48,
              p99_ttft_ms: 1500, p99_tpot_ms: 30}}
        {overrides}
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


def text(on="l40s", concurrency=16, ttft=900, replicas=None):
    overrides = f"overrides: {{replicas: {replicas}, instance_type: g6e.xlarge}}" if replicas else ""
    return CHAT.format(on=on, concurrency=concurrency, ttft=ttft, overrides=overrides)


def plan(on="l40s", concurrency=16, ttft=900, replicas=None):
    return compile_text(text(on, concurrency, ttft, replicas))


def test_a_cpu_measurement_leaves_the_prediction_alone():
    chat = plan(on="cpu").model("chat")  # the tiny model on a CPU says nothing about a GPU
    assert (chat.instance_type, chat.tensor_parallel_size, chat.replicas) == ("g6e.xlarge", 1, 5)
    assert chat.estimates.source.startswith(f"{SIMULATION_SOURCE}, step times from AIConfigurator")


def test_a_gpu_measurement_corrects_the_prediction_to_reproduce_itself():
    """The corrected model, at the measured point (16 in flight, closed loop, prompts of one length), gives
    the measured median TPOT and p99 TTFT back; the plan then rests on the measurement and sizes for it."""
    model = parse_fleet_text(text()).model("chat")
    catalogue = load_instance_catalogue()
    correction = measured_correction(model, PROD, catalogue)
    gpu = catalogue.instances["g6e.xlarge"].gpu
    shape = model_shape(model, precision_on(model, gpu, PROD.vllm.image))
    speed = Speed(gpu_for(gpu), shape, Layout(1, 1, False), 1024, 256, correction)
    service = speed.service(16, 2048)
    assert speed.tpot(16) == pytest.approx(20, rel=0.002)
    assert service + p99_wait_ms(service, speed.rate(16, 2048), 0.0) == pytest.approx(900, rel=0.002)
    chat = plan().model("chat")
    assert (chat.instance_type, chat.replicas, chat.estimates.sequences_per_replica) == ("g6e.xlarge", 5, 10)
    assert chat.estimates.source.startswith(f"{SIMULATION_SOURCE}, step times from measured profile (l40s tp=1, 2026-01-02, 16 in flight): prompts "
                                            "x1.59, decode x0.72 of the prediction (AIConfigurator")


def test_a_measurement_on_the_plans_gpu_that_meets_the_sla_is_reported():
    p = plan()
    measured = p.model("chat").measured
    assert measured.applies and measured.ttft_p99_ms == 900
    assert measured.verdict == "meets the SLA at 16 sequences in flight, at least the 10 the plan puts on each replica at peak"
    assert ("measured (l40s tp=1, 2026-01-02; 16 sequences, 1024 in / 256 out): TTFT median 300 / p99 900 ms, TPOT "
            "median 20 / p99 25 ms, 700 tokens/s; meets the SLA") in format_plan(p)


def test_a_miss_at_no_more_than_the_plans_load_is_an_error():
    """Pinned replicas (on the measured GPU) cannot follow the correction: 16 per replica at peak, and the
    measurement missed at 8."""
    with pytest.raises(CompileError) as caught:
        plan(concurrency=8, ttft=1800, replicas=3)
    (issue,) = caught.value.issues
    assert issue.path == "models[0].profile"
    assert issue.message == ("chat: measured on l40s tp=1 at 8 sequences in flight, no more than the 16 the plan puts "
                             "on each replica at peak, it misses the SLA: p99 TTFT 1800 ms > SLA 1500 ms")
    assert issue.fix.startswith("raise the SLA to the measured figures, or give the model a faster layout")


def test_a_miss_is_followed_by_the_plan_where_it_can_be():
    """Unpinned, the corrected plan leaves the GPU that missed: prompts corrected x4 make the L40S need more
    replicas than two H100s cost, where the L40S measurement is reported, not checked."""
    chat = plan(concurrency=8, ttft=1800).model("chat")
    assert (chat.instance_type, chat.replicas) == ("p5.4xlarge", 2)
    assert chat.measured.verdict.startswith("measured on l40s tp=1, not on this plan's h100")


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
    verdict = plan(concurrency=4, ttft=300, replicas=3).model("chat").measured.verdict
    assert verdict.endswith("fewer than the 16 the plan puts on each replica at peak (no proof at peak: re-measure "
                            "at --concurrency 16)")
