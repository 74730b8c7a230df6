"""The canary objects (#15) against the real CRDs (tests/hardening/crds, unchanged copies) and promtool.

The judges' own tests (test_judges.py) validate every rendered CRD object of every stack; these check that a
canary renders what it must, that the strict real-CRD validation rejects what the API server would, and that
promtool parses every analysis query.
"""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path

import pytest
import yaml

from modelfleet.render.analysis import CANARY_HASH
from tests.hardening.judges import crd_errors, kubernetes_objects, require_executable

pytestmark = pytest.mark.judge  # the real CRDs (kubernetes-validate) and promtool: external judges

SAMPLE_HASH = "7d9c5b8f6"  # a pod-template hash, as Argo Rollouts passes it


def objects(project, stack: str, kind: str) -> list[dict]:
    return [o for o in kubernetes_objects(project.rendered(stack)[1]) if o["kind"] == kind]


@pytest.mark.parametrize("stack, gateway", [("dev", False), ("staging", True), ("prod", False)])
def test_a_canary_model_renders_a_rollout_its_analysis_and_a_route_only_with_a_gateway(project, stack, gateway):
    rollouts = {o["metadata"]["name"]: o for o in objects(project, stack, "Rollout")}
    plan = project.plan(stack)
    server = plan.server(plan.model("fraud-scorer").server).kube_name  # its objects' name in the cluster
    assert {server, "llama-3-1-8b-instruct"} <= set(rollouts)
    assert not any(o["metadata"]["name"] == server for o in objects(project, stack, "Deployment"))
    canary = rollouts[server]["spec"]["strategy"]["canary"]
    assert [s.get("setWeight") for s in canary["steps"] if "setWeight" in s] == [10, 100]
    assert canary["analysis"]["templates"] == [{"templateName": f"{server}-slo"}]
    assert {o["metadata"]["name"] for o in objects(project, stack, "AnalysisTemplate")} >= {f"{server}-slo"}
    routes = objects(project, stack, "HTTPRoute")
    assert bool(routes) == gateway and ("trafficRouting" in canary) == gateway
    scalers = [o["spec"]["scaleTargetRef"] for o in objects(project, stack, "HorizontalPodAutoscaler")]
    assert all(t["kind"] == "Rollout" for t in scalers if t["name"] in rollouts)


@pytest.mark.parametrize("kind, change, expected", [
    ("Rollout", lambda o: o["spec"]["strategy"]["canary"].update(stepz=[]), "Additional properties"),
    ("Rollout", lambda o: o["spec"]["strategy"]["canary"]["steps"][0].update(setWeight="10"), "is not of type"),
    ("AnalysisTemplate", lambda o: o["spec"]["metrics"][0]["provider"]["prometheus"].update(qurey="up"),
     "Additional properties"),
    ("HTTPRoute", lambda o: o["spec"]["rules"][0]["backendRefs"][0].update(weight=-1), "less than the minimum"),
])
def test_the_real_crds_reject_what_the_api_server_would(project, kind, change, expected):
    obj = copy.deepcopy(objects(project, "staging", kind)[0])
    assert crd_errors(obj) == []
    change(obj)
    assert any(expected in e for e in crd_errors(obj)), crd_errors(obj)


def analysis_queries(project) -> list[tuple[str, str]]:
    """(metric name, query with a sample canary hash) of every AnalysisTemplate of every stack."""
    out = []
    for stack in ("dev", "staging", "prod"):
        for template in objects(project, stack, "AnalysisTemplate"):
            for metric in template["spec"]["metrics"]:
                query = metric["provider"]["prometheus"]["query"]
                out.append((metric["name"], query.replace(f"{{{{args.{CANARY_HASH}}}}}", SAMPLE_HASH)))
    return out


def test_promtool_accepts_every_analysis_query(project, tmp_path: Path):
    promtool = require_executable("promtool")
    queries = analysis_queries(project)
    assert {name.rsplit("-", 1)[-1] for name, _ in queries} >= {"ratio", "ms"}
    rules = [{"record": f"canary:{name.replace('-', '_')}:{i}", "expr": query} for i, (name, query) in enumerate(queries)]
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "canary", "rules": rules}]}))
    run = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"SUCCESS: {len(rules)} rules found" in run.stdout


def test_promtool_rejects_a_broken_query(tmp_path: Path):
    """The judge can fail: a query with an unbalanced parenthesis."""
    promtool = require_executable("promtool")
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "g", "rules": [{"record": "r", "expr": "sum(rate(x[2m])"}]}]}))
    run = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
