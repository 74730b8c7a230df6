"""The simulations' seed (plan/llm/speed/peak.seed_of) comes from the traffic, never the model's name: a
renamed model keeps its plan, and two models declaring the same traffic share their simulations."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.plan.llm import search
from modelfleet.plan.llm.speed.peak import SIMULATIONS, Traffic, seed_of, traffic_text
from modelfleet.plan.llm.speed.workload import Lengths
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.models import LlmModelSpec

PROD = EnvironmentSpec(name="prod", region="us-east-1", instance_families=("g5", "g6", "g6e"))

traffics = st.builds(
    Traffic, arrivals=st.sampled_from(("poisson", "bursty")), rate_per_s=st.floats(0.1, 50),
    cv=st.floats(1, 4), input=st.builds(Lengths, mean=st.floats(1, 8000)),
    output=st.builds(Lengths, mean=st.floats(1, 2000)), max_context_tokens=st.integers(1024, 131072))


@settings(max_examples=200, deadline=None)
@given(traffic=traffics, other=traffics, path=st.text(max_size=20))
def test_the_seed_is_a_function_of_the_traffic_alone(traffic, other, path):
    """Equal traffic, equal seed (the trace file's path aside: its rows are in the traffic); traffic that differs
    at 9 significant digits, another seed (64 bits: a collision among generated values would be a bug)."""
    assert seed_of(traffic) == seed_of(replace(traffic, trace_path=path or None))
    assert traffic_text(traffic) == traffic_text(replace(traffic, trace_path=path or None))
    assert (seed_of(traffic) == seed_of(other)) == (traffic_text(traffic) == traffic_text(other))
    assert (traffic_text(traffic) == traffic_text(other)) <= (traffic.arrivals == other.arrivals)
    assert 0 <= seed_of(traffic) < 2**64


def _model(name: str) -> LlmModelSpec:
    return LlmModelSpec.model_validate({
        "name": name, "type": "llm", "artifact": "org/m", "size": {"dtype": "bf16"}, "architecture": "llama-3.1-8b",
        "sla": {"max_context_tokens": 8192, "peak_requests_per_s": 3, "p99_ttft_ms": 1500, "p99_tpot_ms": 60,
                "availability": 99.9, "traffic": {"arrivals": "poisson",
                                                  "input": {"distribution": "lognormal", "mean": 1500, "p99": 6000},
                                                  "output": {"distribution": "lognormal", "mean": 250, "p99": 1200}}}})


def test_a_renamed_model_keeps_its_plan_and_shares_its_simulations():
    catalogue = load_instance_catalogue()
    SIMULATIONS.cache_clear()
    first, _, _ = search.choose_llm_layout(_model("team-a-chat"), PROD, catalogue, 0)
    simulated = len(SIMULATIONS)
    second, _, _ = search.choose_llm_layout(_model("team-b-renamed"), PROD, catalogue, 0)
    assert simulated > 0 and len(SIMULATIONS) == simulated  # every simulation of the second was the first's
    assert (second.instance.name, second.tp, second.pp, second.fit) == (first.instance.name, first.tp, first.pp,
                                                                           first.fit)


@settings(max_examples=200, deadline=None)
@given(traffic=traffics, ulps=st.integers(1, 4))
def test_a_last_bit_difference_in_a_derived_float_keeps_the_seed(traffic, ulps):
    """Two platforms' maths libraries may differ in a derived float's last bit (a lognormal cv from its p99):
    the seed is the same, so the requests drawn are."""
    import math
    nudged = replace(traffic, cv=traffic.cv + ulps * math.ulp(traffic.cv),
                     input=replace(traffic.input, mean=traffic.input.mean + ulps * math.ulp(traffic.input.mean)))
    same_digits = format(nudged.cv, ".9g") == format(traffic.cv, ".9g") and \
        format(nudged.input.mean, ".9g") == format(traffic.input.mean, ".9g")
    assert (seed_of(nudged) == seed_of(traffic)) == same_digits
