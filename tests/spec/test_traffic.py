"""sla.traffic: declared arrivals and lengths, the trace file read into the spec, and located errors with the fix."""

from __future__ import annotations

import textwrap

import pytest

from modelfleet.errors import SpecError
from modelfleet.plan.llm.speed.peak import traffic_of
from modelfleet.spec.load import apply_environment, parse_fleet_text

MODEL = textwrap.dedent("""\
    models:
      - name: chat
        type: llm
        artifact: meta-llama/Llama-3.1-8B-Instruct
        size: {{dtype: bf16}}
        architecture: llama-3.1-8b
        sla:
          max_context_tokens: 8192
          {load}
          p99_ttft_ms: 1500
          {shape}
          traffic: {traffic}
        environments:
          dev: {{sla: {{p99_ttft_ms: 5000}}}}
    """)


def fleet(traffic: str, load: str = "peak_requests_per_s: 4", shape: str = "avg_input_tokens: 2000",
          files: dict[str, str] | None = None):
    def read(path: str) -> str:
        if files is None or path not in files:
            raise FileNotFoundError(2, "No such file or directory")
        return files[path]
    return parse_fleet_text(MODEL.format(traffic=traffic, load=load, shape=shape), known_environments=("dev",),
                            read_config=read)


def problem(*args, **kwargs) -> str:
    with pytest.raises(SpecError) as caught:
        fleet(*args, **kwargs)
    (issue,) = caught.value.issues
    return f"{issue.line}: {issue.path}: {issue.message} ({issue.fix})"


def test_declared_lengths_become_the_simulated_ones_and_their_means_the_averages():
    sla = fleet("{arrivals: bursty, cv: 2, input: {distribution: lognormal, p99: 7000}, "
                "output: {distribution: exponential, mean: 300}}").models[0].sla
    assert (sla.input_tokens(), sla.output_tokens(), sla.arrivals()) == (2000, 300, "bursty")
    traffic = traffic_of(sla)
    assert traffic.input.quantile(0.99) == pytest.approx(7000, rel=1e-6)
    assert (traffic.rate_per_s, traffic.cv, traffic.output.distribution) == (4.0, 2.0, "exponential")


def test_the_peak_key_says_how_requests_arrive_without_traffic():
    closed = traffic_of(fleet("{}", load="peak_concurrent_sequences: 24").models[0].sla)
    tokens = traffic_of(fleet("{}", load="peak_output_tokens_per_s: 1000", shape="avg_output_tokens: 250").models[0].sla)
    assert (closed.arrivals, closed.users, closed.think_time_s, closed.input.distribution) == ("closed", 24, 0.0, "fixed")
    assert (tokens.arrivals, tokens.rate_per_s) == ("poisson", 4.0)


def test_a_trace_is_read_into_the_spec_and_survives_an_environments_patch():
    trace = '{"input_tokens": 1000, "output_tokens": 100, "timestamp": 0}\n{"input_tokens": 3000, "output_tokens": 300, "timestamp": 2.5}\n'
    model = fleet("{trace: traces/chat.jsonl}", shape="", files={"traces/chat.jsonl": trace}).models[0]
    assert model.sla.traffic.trace.rows == ((1000, 100), (3000, 300)) and model.sla.traffic.trace.gaps_s == (2.5,)
    assert (model.sla.input_tokens(), model.sla.output_tokens()) == (2000, 200)
    assert apply_environment(model, "dev").sla.traffic == model.sla.traffic


@pytest.mark.parametrize("traffic, files, expected", [
    ("{trace: t.jsonl}", {}, "12: models[0].sla.traffic.trace: cannot read t.jsonl: No such file or directory"),
    ("{trace: t.jsonl}", {"t.jsonl": "\n\n"}, "12: models[0].sla.traffic.trace: t.jsonl is empty: no request lines"),
    ("{trace: t.jsonl}", {"t.jsonl": '{"input_tokens": 10, "output_tokens": 5}\n{"input_tokens": 10}\n'},
     "12: models[0].sla.traffic.trace: t.jsonl line 2: output_tokens: field required"),
    ("{trace: t.jsonl}", {"t.jsonl": '{"input_tokens": 10, "output_tokens": 5}\nnot json\n'},
     "12: models[0].sla.traffic.trace: t.jsonl line 2: not JSON"),
    ("{trace: t.jsonl}", {"t.jsonl": '{"input_tokens": 8000, "output_tokens": 500}\n{"input_tokens": 10, "output_tokens": 9}\n'},
     "12: models[0].sla.traffic.trace: t.jsonl request 1: 8,000 + 500 tokens exceed max_context_tokens (8,192)"),
    ("{trace: ../t.jsonl}", {}, "12: models[0].sla.traffic.trace: trace path '../t.jsonl' must be relative"),
])
def test_a_bad_trace_is_a_located_error(traffic, files, expected):
    assert problem(traffic, shape="", files=files).startswith(expected)


@pytest.mark.parametrize("traffic, expected", [
    ("{input: {distribution: lognormal, p99: 1500}}",
     "12: models[0].sla.traffic.input.p99: p99 (1,500) is not above the mean (2,000)"),
    ("{input: {distribution: lognormal, p99: 40000}}",
     "12: models[0].sla.traffic.input.p99: p99 (40,000) is more than 14.9 times the mean"),
    ("{input: {distribution: lognormal, p99: 8000}}",
     "12: models[0].sla.traffic.input.p99: p99 (8,000) exceeds the 7,936 tokens the context leaves"),
    ("{input: {distribution: exponential, mean: 1000}}",
     "12: models[0].sla.traffic.input.mean: the declared mean (1,000 tokens) differs from avg_input_tokens (2,000)"),
    ("{input: {distribution: exponential, p99: 9000}}",
     "12: models[0].sla.traffic.input.p99: exponential lengths have no p99 to choose"),
    ("{input: {distribution: lognormal}}", "12: models[0].sla.traffic.input.p99: lognormal lengths need their spread"),
    ("{input: {histogram: [[100, 1], [9000, 1]]}}",
     "12: models[0].sla.traffic.input.histogram: the declared mean (4,550 tokens) differs from avg_input_tokens"),
    ("{cv: 2}", "12: models[0].sla.traffic.cv: cv describes bursty arrivals, not the default (add arrivals: bursty"),
    ("{arrivals: bursty}", "12: models[0].sla.traffic.cv: bursty arrivals need their cv"),
    ("{think_time_s: 5}", "12: models[0].sla.traffic.think_time_s: think_time_s belongs to a closed loop of users"),
    ("{arrivals: closed}", "12: models[0].sla.traffic.arrivals: a closed loop needs its users"),
])
def test_a_contradictory_declaration_is_a_located_error_with_the_fix(traffic, expected):
    assert problem(traffic).startswith(expected)


def test_an_open_process_with_a_sequences_load_is_refused():
    assert problem("{arrivals: poisson}", load="peak_concurrent_sequences: 8").startswith(
        "12: models[0].sla.traffic.arrivals: poisson arrivals need a rate")
