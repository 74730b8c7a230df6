"""Every alert has its runbook: a section of docs/runbooks/alerts.md whose anchor its runbook_url names, and a row
in docs/operations/observability.md's table."""

from __future__ import annotations

import re

from modelfleet.render.k8s import vllm_models
from modelfleet.render.observability import rule_groups
from modelfleet.render.observability.catalogue import KINDS, runbook_url
from tests.conftest import ROOT, STACKS

RUNBOOKS = (ROOT / "docs" / "runbooks" / "alerts.md").read_text()
OVERVIEW = (ROOT / "docs" / "operations" / "observability.md").read_text()


def test_every_alert_kind_has_a_runbook_section_and_a_row():
    sections = re.findall(r"^## (\S+)$", RUNBOOKS, re.M)
    assert sections == [k.name for k in KINDS]
    for kind in KINDS:
        assert f"[{kind.name}](../runbooks/alerts.md#{kind.anchor})" in OVERVIEW, kind.name
        body = RUNBOOKS.split(f"## {kind.name}\n", 1)[1].split("\n## ", 1)[0]
        assert "**What it means.**" in body and "**What to do.**" in body, kind.name


def test_every_generated_alert_links_its_runbook(plans):
    for stack in STACKS:
        plan = plans[stack]
        for workload in (*plan.triton_servers, *vllm_models(plan)):
            for rule in (r for g in rule_groups(plan, workload) for r in g["rules"]):
                assert rule["annotations"]["runbook_url"] == runbook_url(rule["alert"], None)
                assert rule["annotations"]["summary"] and rule["annotations"]["description"]


def test_a_published_site_gets_absolute_links():
    assert runbook_url("VllmKvCacheNearFull", "https://docs.example.com/modelfleet/") == (
        "https://docs.example.com/modelfleet/runbooks/alerts/#vllmkvcachenearfull")
