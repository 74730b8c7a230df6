"""The canary analysis's latency gate means what the SLA means: for a streaming (decoupled) model, the time to
its first response, from Triton's first-response histogram; evaluated by the real promtool on synthetic series
of the canary's pods (Triton 2.51 here exports no such histogram, docs/engines.md: the deployed 2.73 does)."""

from __future__ import annotations

import re

import pytest
import yaml

from modelfleet.plan.compiler import compile_fleet
from modelfleet.render.analysis import CANARY_HASH, analysis_template, workload_queries
from modelfleet.spec.load import parse_fleet_text
from tests.engines.slo_streaming import FLEET, MODEL
from tests.observability import promtool

CANARY = "5f7d8c9b6d"
ROLLOUT = "    rollout: {strategy: canary, steps: [10, 100], pause: 1m}\n"


@pytest.fixture(scope="module")
def streaming_plan(project):
    text = FLEET.replace("    streaming: true\n", "    streaming: true\n" + ROLLOUT)
    return compile_fleet(parse_fleet_text(text), project.environment("dev"), project.catalogue())


def _latency(plan) -> tuple[str, str, str]:
    server = plan.triton_servers[0]
    assert "--metrics-config=histogram_latencies=true" in server.args  # else the histogram is never exported
    template = analysis_template(plan, server, {"name": "x"})
    names = [m["name"] for m in template["spec"]["metrics"]]
    assert names == [f"{MODEL}-error-ratio", f"{MODEL}-first-response-p99-ms"]
    (name, query, condition), = [q for q in workload_queries(plan, server) if q[0].endswith("p99-ms")]
    return name, query.replace(f"{{{{args.{CANARY_HASH}}}}}", CANARY), condition


def test_a_streaming_models_canary_gate_is_its_first_response(streaming_plan):
    _, query, condition = _latency(streaming_plan)
    assert "nv_inference_first_response_histogram_ms_bucket" in query and "_summary_us" not in query
    assert condition == "result[0] <= 100"  # the SLA's p99_latency_ms: the first response's


def _series(plan, above_ms: float) -> list[dict[str, str]]:
    """A minute's 100 first responses each, all in the bucket that ends at ``above_ms``, on a canary pod."""
    server = plan.triton_servers[0].name
    labels = (f'namespace="{plan.namespace}", pod="{server}-{CANARY}-x7k2p", model="{MODEL}", version="1"')
    return [{"series": f'nv_inference_first_response_histogram_ms_bucket{{{labels}, le="{le}"}}',
             "values": "0+100x30" if float(le) >= above_ms else "0x30"} for le in ("5", "10", "50", "100", "500", "+Inf")]


def test_promtool_evaluates_the_gate_on_first_response_buckets(streaming_plan, tmp_path):
    _, query, condition = _latency(streaming_plan)
    bound = float(re.fullmatch(r"result\[0\] <= ([0-9.]+)", condition).group(1))
    # linear inside the bucket: 5 + 0.99 x 5 = 9.95 ms (passes); 100 + 0.99 x 400 = 496 ms (fails the 100 ms)
    cases = [(_series(streaming_plan, 10), 9.95), (_series(streaming_plan, 500), 496)]
    assert [value <= bound for _, value in cases] == [True, False]
    (tmp_path / "none.yaml").write_text("groups: []\n")
    tests = [{"interval": "1m", "input_series": series,
              "promql_expr_test": [{"expr": query, "eval_time": "10m", "exp_samples": [{"labels": "{}", "value": value}]}]}
             for series, value in cases]
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({"rule_files": ["none.yaml"], "evaluation_interval": "1m",
                                                        "tests": tests}))
    result = promtool.run("test", "rules", str(tmp_path / "test.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_model_answering_once_keeps_the_stage_summaries(plans):
    plan = plans["dev"]
    server = plan.model("fraud-scorer").server
    queries = dict((n, q) for n, q, _ in workload_queries(plan, next(s for s in plan.triton_servers if s.name == server)))
    assert 'nv_inference_queue_summary_us' in queries["fraud-scorer-p99-ms"]
