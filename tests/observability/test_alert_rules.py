"""The generated alert rules before the real judges: ``promtool check rules`` on every rule file of every
stack, ``promtool test rules`` per alert kind (fires on a bad series, silent on a good one), and the
PrometheusRule objects against the real CRD."""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path

import jsonschema
import pytest
import yaml

from modelfleet.render.k8s import vllm_models
from modelfleet.render.observability import prometheus_rule, rule_groups
from modelfleet.render.observability.catalogue import KINDS
from tests.conftest import STACKS
from tests.observability import promtool
from tests.observability.alert_cases import Case, all_cases

pytestmark = pytest.mark.judge
CRD = Path(__file__).resolve().parent / "crds" / "monitoring.coreos.com_prometheusrules.yaml"


def workloads(plan):
    return [*plan.triton_servers, *vllm_models(plan)]


@pytest.mark.parametrize("stack", STACKS)
def test_promtool_checks_every_generated_rule_file(plans, stack, tmp_path):
    plan = plans[stack]
    files = [promtool.write_rules(tmp_path / f"{w.name}.yaml", rule_groups(plan, w)) for w in workloads(plan)]
    result = promtool.check_rules(*files)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(files)


def test_the_test_sized_rules_pass_promtool_too(plans, tmp_path):
    """The end-to-end test's scale (every window and `for` divided by 60) still gives valid durations."""
    plan = plans["dev"]
    files = [promtool.write_rules(tmp_path / f"{w.name}.yaml", rule_groups(plan, w, scale=60)) for w in workloads(plan)]
    result = promtool.check_rules(*files)
    assert result.returncode == 0, result.stdout + result.stderr


@cache
def _cases(plan_json: str) -> list[Case]:
    from modelfleet.plan.types import FleetPlan

    return all_cases(FleetPlan.model_validate_json(plan_json))


def cases(plans) -> list[Case]:
    return _cases(plans["prod"].model_dump_json())


def test_every_alert_kind_has_a_unit_test(plans):
    assert sorted({c.alert for c in cases(plans)}) == sorted(k.name for k in KINDS)


def _unit_test(case: Case, rules: str) -> dict:
    def scenario(input_series, fires: bool) -> dict:
        expected = [{"exp_labels": case.labels}] if fires else []
        return {"interval": "1m", "input_series": input_series,
                "alert_rule_test": [{"eval_time": f"{case.eval_minutes}m", "alertname": case.alert,
                                     "exp_alerts": expected}]}
    return {"rule_files": [rules], "evaluation_interval": "1m",
            "tests": [scenario(case.bad, True), scenario(case.good, False)]}


def _without_annotations(groups: list[dict]) -> list[dict]:
    groups = copy.deepcopy(groups)
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    return groups


@pytest.mark.parametrize("index", range(25))
def test_each_alert_fires_on_a_bad_series_and_stays_silent_on_a_good_one(plans, index, tmp_path):
    all_of_them = cases(plans)
    assert len(all_of_them) == 25  # the parametrisation's range
    case = all_of_them[index]
    rules = promtool.write_rules(tmp_path / "rules.yaml", _without_annotations(case.groups))
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(_unit_test(case, rules.name)))
    result = promtool.run("test", "rules", str(tmp_path / "test.yaml"))
    assert result.returncode == 0, f"{case.alert} ({case.variant}):\n{result.stdout}{result.stderr}"


def test_a_unit_test_can_fail(plans, tmp_path):
    """The judge is not a rubber stamp: expecting the bad series to stay silent fails."""
    case = cases(plans)[0]
    rules = promtool.write_rules(tmp_path / "rules.yaml", _without_annotations(case.groups))
    test = _unit_test(case, rules.name)
    test["tests"][0]["alert_rule_test"][0]["exp_alerts"] = []
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(test))
    assert promtool.run("test", "rules", str(tmp_path / "test.yaml")).returncode != 0


@cache
def _crd_validator():
    crd = yaml.safe_load(CRD.read_text())
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
    return jsonschema.Draft7Validator(schema)


@pytest.mark.parametrize("stack", STACKS)
def test_prometheus_rules_validate_against_the_real_crd(plans, stack):
    plan = plans[stack]
    for workload in workloads(plan):
        obj = prometheus_rule(plan, workload.name, rule_groups(plan, workload))
        errors = [f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in _crd_validator().iter_errors(obj)]
        assert errors == [], (workload.name, errors)


def test_the_crd_judge_rejects_a_malformed_rule(plans):
    plan = plans["prod"]
    obj = prometheus_rule(plan, "x", rule_groups(plan, plan.triton_servers[0]))
    obj["spec"]["groups"][0]["rules"][0]["for"] = "two minutes"
    assert list(_crd_validator().iter_errors(obj))
