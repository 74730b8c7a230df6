"""Classic models' speed: the datasheet bound, the execution budget of an unmeasured model, the CompileError
of an impossible SLA, profiles that apply (and one that does not), and how plan and cost mark them."""

from __future__ import annotations

import textwrap

import pytest

from modelfleet.commands.plan import format_plan
from modelfleet.cost.fleet import estimate_unit_cost
from modelfleet.cost.report import _unit
from modelfleet.errors import CompileError
from modelfleet.plan.triton.bounds import batch_bound
from modelfleet.plan.triton.speed import classic_speed
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.load import parse_fleet_text
from tests.test_compile_cases import compile_text

# The issue's example: a 7B fp16 model at p99 1 ms and 5,000,000 req/s, with no profile.
SEVEN_B = textwrap.dedent("""\
    models:
      - name: big-nlp
        type: nlp
        framework: {framework}
        artifact: s3://acme-ml-models/triton/big-nlp
        size: {size}
        inputs:
          - {{name: input_ids, dtype: int64, dims: [-1]}}
        outputs:
          - {{name: logits, dtype: fp32, dims: [2]}}
        sla: {{p99_latency_ms: {p99}, peak_rps: {rps}}}
    {profile}""")


def fleet(p99="1", rps="5000000", size="{params: 7B, dtype: fp16}", profile="", framework="onnx") -> str:
    return SEVEN_B.format(p99=p99, rps=rps, size=size, profile=textwrap.indent(profile, "    "), framework=framework)


@pytest.fixture(scope="module")
def gpus(catalogue):
    return {i.gpu.key: i.gpu for i in catalogue.instances.values()}


def test_the_bound_of_7b_fp16_by_hand(gpus):
    # weights 7e9 x 2 bytes = 14e9 bytes; H100: 14e9 / 3,350e9 B/s = 4.179 ms; FLOPs 2 x 7e9 / 989e12 = 0.01416 ms
    h100 = batch_bound(7_000_000_000, "fp16", 1, gpus["h100"])
    assert h100.memory_ms == pytest.approx(4.1791, abs=1e-4) and h100.compute_ms == pytest.approx(0.014156, rel=1e-4)
    assert h100.ms == h100.memory_ms and h100.binding == "memory bandwidth"
    # A10G: 14e9 / 600e9 = 23.33 ms; a batch of 4,096 is compute-bound: 2 x 7e9 x 4096 / 125e12 = 458.75 ms
    assert batch_bound(7_000_000_000, "fp16", 1, gpus["a10g"]).ms == pytest.approx(23.333, abs=1e-3)
    big = batch_bound(7_000_000_000, "fp16", 4096, gpus["a10g"])
    assert big.binding == "compute" and big.ms == pytest.approx(458.752, abs=1e-3)
    # int8 halves the bytes and runs at twice the peak: 7e9 / 3,350e9 = 2.09 ms
    assert batch_bound(7_000_000_000, "int8", 1, gpus["h100"]).ms == pytest.approx(2.0896, abs=1e-4)


def test_an_impossible_sla_without_a_profile_fails_with_the_bound_named():
    with pytest.raises(CompileError) as caught:
        compile_text(fleet())
    (issue,) = caught.value.issues
    assert issue.path == "models[0].sla.p99_latency_ms"
    # prod allows g5, g6, g6e, p4d and p5: the fastest GPU there is the H100
    assert issue.message == (
        "big-nlp: p99 1 ms is below the datasheet bound on NVIDIA H100: one item, a batch of 1, is memory "
        "bandwidth-bound: 13.04 GiB of fp16 weights at 3,350 GB/s = 4.18 ms (and 2 x 7B params x 1 FLOPs at 989 "
        "TFLOPS = 0.0142 ms); the worst answered request waits for the batch in progress and runs its own, at "
        "least 2 x 4.18 = 8.36 ms (the model has no measured profile)")
    assert issue.fix.startswith("raise sla.p99_latency_ms above 9 ms; or store the weights in fewer bits")
    assert "a measured profile replaces the bound" in issue.fix
    # p5en is not allowed in prod: the H200 reads faster, yet not fast enough for 1 ms
    assert issue.fix.endswith("the fastest, NVIDIA H200 (p5en), takes 5.83 ms for the two executions")


def test_a_gpu_not_allowed_that_would_do_is_named():
    env = EnvironmentSpec(name="dev", region="us-east-1", instance_families=("g5", "g6"))
    with pytest.raises(CompileError) as caught:
        compile_text(fleet(p99="20"), env)  # A10G: 2 x 23.3 = 46.7 ms > 20; A100 and H100/H200 fit
    (issue,) = caught.value.issues
    assert "datasheet bound on NVIDIA A10G" in issue.message and "2 x 23.3 = 46.7 ms" in issue.message
    assert issue.fix.endswith("or allow p4d or p4de or p5 or p5en, whose GPUs' bound leaves time to queue")


def test_a_feasible_unmeasured_model_is_planned_on_its_bound_and_marked(gpus):
    plan = compile_text(fleet(p99="10", rps="100"))
    m = plan.model("big-nlp")
    # only the H100 leaves time to queue (A100 80GB: 2 x 6.87 > 9.5); the bound (4.18 ms) exceeds the budget
    # (2.5 ms), so it is the batch's time; memory-bound, a batch of 16 takes as long as one item
    assert m.instance_type == "p5.4xlarge" and not m.measured
    assert m.compute_ms == 4.18 and m.bound_ms == pytest.approx(4.1791, abs=1e-4) and m.max_batch_size == 16
    assert m.queue_timeout_us == 1600  # 10,000 - 2 x 4,180, in hundreds
    assert m.speed_basis.startswith("UNMEASURED: a full batch of 16 is given an execution budget of 4.18 ms")
    assert "datasheet bound 4.18 ms (batch of 16 on NVIDIA H100: 13.04 GiB of fp16 weights" in m.speed_basis
    text = format_plan(plan)
    assert "      speed: a full batch 4.18 ms, 1913.88 req/s per instance; UNMEASURED: " in text
    warning = next(w.message for w in plan.warnings if w.model == "big-nlp")
    assert warning.startswith("no measured profile applies, assuming compute_ms=4.18 (an execution budget")
    assert "`modelfleet profile --stack STACK --url URL`" in warning


def test_the_budget_binds_when_the_bound_is_small(gpus, catalogue):
    # 25.6M fp32 params on an A10G: 102.4 MB / 600 GB/s = 0.17 ms, far below a quarter of 100 ms
    spec = parse_fleet_text(fleet(p99="100", rps="100", size="{params: 25.6M, dtype: fp32}")).models[0]
    speed = classic_speed(spec, gpus["a10g"], catalogue, 16)
    assert speed.compute_ms == 25.0 and speed.rps == pytest.approx(16 * 0.5 / 0.025)
    assert speed.bound.ms == pytest.approx(0.1707, abs=1e-4) and not speed.measured


def test_memory_gib_gives_no_bound_and_says_so(gpus, catalogue):
    spec = parse_fleet_text(fleet(p99="100", rps="100", size="{memory_gib: 2}")).models[0]
    speed = classic_speed(spec, gpus["a10g"], catalogue, 16)
    assert speed.bound is None and speed.compute_ms == 25.0
    assert "no datasheet bound: the size is given as memory_gib" in speed.basis


MEASURED = """profile:
  measured_on: {on}
  measured_at: "2026-01-02"
  batches:
    - {{batch_size: 1, throughput_rps: 200, p99_ms: 5}}
    - {{batch_size: 4, throughput_rps: 600, p99_ms: 8}}
    - {{batch_size: 16, throughput_rps: 1600, p99_ms: 12}}
    - {{batch_size: 64, throughput_rps: 2000, p99_ms: 40}}
"""


def test_a_batch_table_picks_the_largest_batch_within_the_budget(gpus, catalogue):
    # p99 50 ms: 0.4 x 50 = 20 ms; batch 64 takes 40 ms measured on an A10G: the largest within is 16 (12 ms)
    spec = parse_fleet_text(fleet(p99="50", rps="100", profile=MEASURED.format(on="a10g"))).models[0]
    speed = classic_speed(spec, gpus["a10g"], catalogue, 64)
    assert (speed.batch, speed.compute_ms, speed.rps, speed.measured) == (16, 12.0, 1600.0, True)
    assert speed.basis == "measured on NVIDIA A10G, 2026-01-02: batch 16 of the measured batch sizes 1, 4, 16, 64"
    # on an L4 (half the A10G's bandwidth) every row takes twice as long: 16 takes 24 ms > 20, so 4 (16 ms)
    on_l4 = classic_speed(spec, gpus["l4"], catalogue, 64)
    assert (on_l4.batch, on_l4.compute_ms, on_l4.rps) == (4, 16.0, 300.0)
    assert on_l4.basis.startswith("measured on NVIDIA A10G, 2026-01-02, scaled to NVIDIA L4 by the roofline ratio 0.5")


def test_a_cpu_profile_applies_to_a_python_model_only(gpus, catalogue):
    onnx = parse_fleet_text(fleet(p99="50", rps="100", profile=MEASURED.format(on="cpu"))).models[0]
    python = parse_fleet_text(fleet(p99="50", rps="100", profile=MEASURED.format(on="cpu"),
                                    framework="python")).models[0]
    assert not classic_speed(onnx, gpus["a10g"], catalogue, 64).measured
    assert "its profile was measured on a CPU, which says nothing about a GPU" in classic_speed(
        onnx, gpus["a10g"], catalogue, 64).basis
    speed = classic_speed(python, gpus["h100"], catalogue, 64)  # no GPU ratio: execute() runs on the CPU
    assert (speed.batch, speed.compute_ms, speed.measured) == (16, 12.0, True)
    assert speed.basis.startswith("measured on a CPU, 2026-01-02, used as measured: a python-backend model's")


def test_the_cost_comment_marks_an_unmeasured_model():
    plan = compile_text(fleet(p99="10", rps="100"))
    unit = estimate_unit_cost(plan.model("big-nlp"), 1000.0, None)
    assert unit.unmeasured == plan.model("big-nlp").speed_basis
    assert _unit(unit).endswith("⚠️ UNMEASURED speed: its replicas rest on an execution budget floored by the "
                                "datasheet bound, not on a profile (`modelfleet profile`)")


def test_the_example_fleet_is_measured_and_says_where(plans):
    for model in plans["prod"].models:
        if model.serving == "triton" and model.type != "llm":
            where = "measured on c7i (Sapphire Rapids" if model.device == "cpu" else "measured on NVIDIA A10G"
            assert model.measured and model.speed_basis.startswith(where)
            assert estimate_unit_cost(model, 1000.0, None).unmeasured is None
