"""Dashboards: every panel's query parses (as a recording rule under promtool), the JSON grafana-foundation-sdk
builds is deterministic and shaped as Grafana reads it, and the ConfigMaps carry what the sidecar selects."""

from __future__ import annotations

import json

import pytest
import yaml

from modelfleet.render.k8s import vllm_models
from modelfleet.render.manifests import render_fleet_manifests
from modelfleet.render.observability import DASHBOARD_LABEL, FOLDER_ANNOTATION, fleet_dashboard, workload_dashboard
from tests.conftest import STACKS
from tests.observability import promtool

grafana = pytest.importorskip("modelfleet.grafana")  # the module imports; the SDK is checked below
pytest.importorskip("grafana_foundation_sdk")


def dashboards(project, stack):
    plan, cost = project.plan_and_cost(stack)
    return [*(workload_dashboard(plan, w) for w in (*plan.triton_servers, *vllm_models(plan))),
            fleet_dashboard(plan, cost)]


@pytest.mark.judge
@pytest.mark.parametrize("stack", STACKS)
def test_every_panel_query_parses(project, stack, tmp_path):
    queries = {f"{d.uid}:{i}": q.expr for d in dashboards(project, stack) for i, q in enumerate(d.queries())}
    rules = promtool.write_rules(tmp_path / "panels.yaml", promtool.recording_rules(queries))
    result = promtool.check_rules(rules)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"{len(queries)} rules found" in result.stdout


def test_promtool_rejects_a_broken_query(tmp_path):
    rules = promtool.write_rules(tmp_path / "panels.yaml", promtool.recording_rules({"x": "sum(rate(x[5m])"}))
    assert promtool.check_rules(rules).returncode != 0


def test_the_json_is_the_same_every_time_and_every_panel_has_its_queries(project):
    for spec in dashboards(project, "prod"):
        first, second = grafana.build_dashboard(spec), grafana.build_dashboard(spec)
        assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)
        panels = [p for p in first["panels"] if p["type"] != "row"]
        built = [t["expr"] for p in panels for t in p.get("targets", [])]
        assert built == [q.expr for q in spec.queries()]
        assert first["uid"] == spec.uid and len(first["uid"]) <= 40
        ids = [p["id"] for p in first["panels"]]
        assert ids == sorted(set(ids))
        assert first["templating"]["list"][0]["type"] == "datasource"


def test_sla_lines_are_the_sla(project):
    plan, _ = project.plan_and_cost("prod")
    llm = plan.model("llama-3-1-8b-instruct")
    built = grafana.build_dashboard(workload_dashboard(plan, llm))
    ttft = next(p for p in built["panels"] if p["title"] == "TTFT p99 vs SLA")
    steps = ttft["fieldConfig"]["defaults"]["thresholds"]["steps"]
    assert steps[-1] == {"color": "red", "value": llm.p99_ttft_ms}
    assert ttft["fieldConfig"]["defaults"]["custom"]["thresholdsStyle"]["mode"] == "line"


def test_each_workload_ships_its_dashboard_as_a_config_map_for_the_sidecar(project):
    plan, cost = project.plan_and_cost("prod")
    manifests = render_fleet_manifests(plan, project.environment("prod").deploy, dashboards=grafana.build_dashboard,
                                       cost=cost)
    for name, objects in manifests.items():
        maps = [o for o in objects if o["kind"] == "ConfigMap" and DASHBOARD_LABEL.items() <= o["metadata"]["labels"].items()]
        assert len(maps) == 1, name
        meta = maps[0]["metadata"]
        assert meta["labels"].items() >= DASHBOARD_LABEL.items() and meta["annotations"][FOLDER_ANNOTATION]
        (key, text), = maps[0]["data"].items()
        assert json.loads(text)["uid"] + ".json" == key
    text = yaml.safe_dump(manifests["cluster"])
    assert "fleet overview" in text and f"{cost.monthly_usd.desired:,.2f}" in text


def test_without_the_sdk_render_names_the_extra(monkeypatch):
    import builtins

    real = builtins.__import__

    def no_sdk(name, *args, **kwargs):
        if name.startswith("grafana_foundation_sdk"):
            raise ImportError(name)
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sdk)
    from modelfleet.errors import MissingExtra

    with pytest.raises(MissingExtra) as error:
        grafana.dashboard_builder()
    assert "modelfleet[dashboards]" in str(error.value)


@pytest.mark.judge
def test_the_cluster_panels_answer_from_kube_state_metrics_series(plans, tmp_path):
    """The panels that read kube-state-metrics (no engine here exports them): evaluated by promtool on
    kube-state-metrics' series shapes, they count this workload's pods and GPUs and nobody else's."""
    plan = plans["prod"]
    server = plan.triton_servers[0].name
    mine, other = f"{server}-7d9f8c6b5-x2x4z", f"{server}-extra-7d9f8c6b5-x2x4z"
    ready = [{"series": f'kube_pod_status_ready{{namespace="{plan.namespace}",pod="{pod}",condition="{c}"}}',
              "values": f"{v}x5"} for pod in (mine, other) for c, v in (("true", 0), ("false", 1))]
    gpus = [{"series": f'kube_pod_container_resource_requests{{namespace="{plan.namespace}",pod="{pod}",'
                       f'container="triton",resource="nvidia_com_gpu",unit="integer"}}', "values": "1x5"}
            for pod in (mine, other)]
    panels = {p.title: p.queries[0].expr for row in workload_dashboard(plan, plan.triton_servers[0]).rows
              for p in row.panels if p.queries}
    tests = [{"expr": panels["Pods not ready"], "eval_time": "2m", "exp_samples": [{"labels": "{}", "value": 1}]},
             {"expr": panels["GPUs requested"], "eval_time": "2m", "exp_samples": [{"labels": "{}", "value": 1}]}]
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({"rule_files": [], "tests": [
        {"interval": "1m", "input_series": ready + gpus, "promql_expr_test": tests}]}))
    result = promtool.run("test", "rules", str(tmp_path / "test.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_render_writes_the_rules_and_dashboards_of_every_workload_the_same_every_time(tmp_path):
    import subprocess
    import sys

    from tests.conftest import ROOT

    outputs = []
    for name in ("a", "b"):
        run = subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(ROOT), "render", "--stack", "prod",
                              "--out", str(tmp_path / name)], capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        outputs.append({p.name: p.read_bytes() for p in (tmp_path / name / "kubernetes").iterdir()})
    assert outputs[0] == outputs[1]
    for file, text in outputs[0].items():
        kinds = [(o["kind"], bool(o["metadata"].get("labels", {}).get("grafana_dashboard")))
                 for o in yaml.safe_load_all(text) if o]
        dashboards_in_it = kinds.count(("ConfigMap", True))
        assert dashboards_in_it == 1, file
        assert kinds.count(("PrometheusRule", False)) == (0 if file == "cluster.yaml" else 1), file
