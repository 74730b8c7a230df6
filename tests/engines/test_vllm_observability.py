"""The vLLM alerts and dashboards against the REAL vLLM (CPU build): every ``vllm:`` metric an alert or panel of
any stack names is on its /metrics, and a real Prometheus scraping it evaluates the model's rules without
error and answers every query of its dashboard.

Runs in CI's vLLM step (``.venv-vllm``, where vLLM is importable); the server is ``modelfleet serve --llm``
with the tiny random Llama, as in test_serve_llm.py.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import time
import urllib.request

import pytest

from modelfleet.engines.process import signal_group
from modelfleet.render.observability import fleet_dashboard, rule_groups, workload_dashboard
from tests.conftest import STACKS
from tests.engines.conftest import Output
from tests.engines.local_vllm import LLM, LOOPBACK, READY_LINE, require_vllm, serve_llm
from tests.observability.metric_names import by_source, exported, exprs, names_in
from tests.observability.prometheus_server import LocalPrometheus, ScrapeTarget

pytestmark = pytest.mark.engine("vllm")

require_vllm()


def _get(url: str) -> str:
    with LOOPBACK.open(url, timeout=30) as response:
        return response.read().decode()


def _complete(base: str, tokens: int) -> None:
    body = json.dumps({"model": LLM, "prompt": "the quick brown fox", "max_tokens": tokens, "temperature": 0})
    request = urllib.request.Request(base + "/v1/completions", body.encode(), {"Content-Type": "application/json"})
    with LOOPBACK.open(request, timeout=120) as response:
        assert response.status == 200


@pytest.fixture(scope="module")
def vllm_server(tmp_path_factory):
    """The real vLLM's address (host:port), after a few completions."""
    tmp = tmp_path_factory.mktemp("vllm-observability")
    process = serve_llm(tmp, new_session=True)
    output = Output(process)
    try:
        text = output.until(READY_LINE, 300)
        address = re.search(r"OpenAI API http://(127\.0\.0\.1:\d+)/v1", text).group(1)
        yield address
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(90)
            except subprocess.TimeoutExpired:
                signal_group(process.pid, signal.SIGKILL)
                process.wait(10)


def test_every_vllm_metric_an_alert_or_panel_names_is_exported(project, vllm_server) -> None:
    _complete(f"http://{vllm_server}", 4)
    used = set()
    for stack in STACKS:
        plan, cost = project.plan_and_cost(stack)
        tpot = plan.model(LLM).model_copy(update={"p99_tpot_ms": 50.0})  # the TPOT alert, once the SLA has it
        used |= names_in(exprs(plan, cost)) | names_in(r["expr"] for g in rule_groups(plan, tpot) for r in g["rules"])
    missing = sorted(by_source(used)["vllm"] - exported(_get(f"http://{vllm_server}/metrics")))
    assert by_source(used)["vllm"] and missing == [], missing


def test_prometheus_evaluates_the_rules_and_answers_every_dashboard_query(project, vllm_server, tmp_path) -> None:
    plan, cost = project.plan_and_cost("dev")
    model = plan.model(LLM)
    target = ScrapeTarget(LLM, vllm_server, {"namespace": plan.namespace, "pod": f"{LLM}-5c7b9d8f6-q8w2e"})
    groups = rule_groups(plan, model.model_copy(update={"p99_tpot_ms": 50.0}), scale=60)
    with LocalPrometheus(tmp_path / "prometheus", [target], groups) as prom:
        assert prom.wait_for(f'up{{job="{LLM}"}} == 1', 30), "Prometheus never scraped vLLM"
        for tokens in (4, 8, 16):  # after the first scrapes, so that the rates see them
            _complete(f"http://{vllm_server}", tokens)
        time.sleep(3)  # three more scrapes and evaluations
        rules = [r for g in prom.api("rules")["groups"] for r in g["rules"]]
        assert len(rules) == sum(len(g["rules"]) for g in groups)
        assert [r["name"] for r in rules if r["health"] != "ok"] == []
        queries = [*workload_dashboard(plan, model).queries(),
                   *(q for q in fleet_dashboard(plan, cost).queries() if f'job="{LLM}"' in q.expr)]
        engine = [q for q in queries if by_source(names_in([q.expr]))["vllm"]]
        empty = [q.expr for q in engine if not prom.query(q.expr)]
        assert engine and empty == [], f"{len(empty)} of {len(engine)} queries returned nothing: {empty}"
