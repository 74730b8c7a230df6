"""`cost` and the cost fields of `plan --json` / `render` on the example project."""

from __future__ import annotations

import json

import pytest

from modelfleet.cli import main
from tests.conftest import ROOT
from tests.cost.test_diff import check_golden


def _run(capsys, *argv: str) -> str:
    assert main(["--project", str(ROOT), *argv]) == 0
    return capsys.readouterr().out


def test_cost_prod_text_matches_golden(capsys):
    check_golden("prod-cost.txt", _run(capsys, "cost", "--stack", "prod"))


def test_cost_json_is_deterministic_and_complete(capsys):
    first = _run(capsys, "cost", "--format", "json")
    assert first == _run(capsys, "cost", "--format", "json")
    data = json.loads(first)["environments"]
    assert sorted(data) == ["dev", "prod", "staging"]
    prod = data["prod"]
    assert prod["monthly_usd"] == {"desired": 196899.66, "max": 296028.75, "min": 180221.87}
    assert prod["budget"]["over"] is False and prod["budget"]["budget_usd"] == 250000.0
    assert prod["policy_violations"] == []
    assert prod["node_groups"][1]["usd_per_node_hour"] == 10.49264  # prices keep their published precision
    assert list(prod) == sorted(prod)


def test_plan_json_gains_monthly_cost_usd(capsys):
    doc = json.loads(_run(capsys, "plan", "--stack", "prod", "--json"))
    assert doc["monthly_cost_usd"] == {"desired": 196899.66, "max": 296028.75, "min": 180221.87}
    groups = {g["instance_type"]: g["monthly_cost_usd"] for g in doc["node_groups"]}
    assert groups["p5.48xlarge"] == {"desired": 160716.8, "max": 241075.2, "min": 160716.8}  # 4/4/6 x 55.04 x 730
    models = {m["name"]: m["monthly_cost_usd"]["desired"] for m in doc["models"]}
    assert models["llama-3-3-70b-instruct"] == 30638.51
    assert sum(models.values()) == pytest.approx(doc["monthly_cost_usd"]["desired"], abs=0.05)


def test_render_writes_the_same_costs_into_plan_json(tmp_path, capsys):
    _run(capsys, "render", "--stack", "dev", "--out", str(tmp_path / "dev"))
    doc = json.loads((tmp_path / "dev" / "plan.json").read_text())
    assert doc["monthly_cost_usd"]["desired"] == 5188.34  # 3,829.81 + 2 x 679.27 (g6e.12xlarge, g6e.xlarge; spot at 50%)


def test_markdown_preview_is_a_pr_comment(capsys):
    text = _run(capsys, "cost", "--format", "markdown")
    assert text.startswith("<!-- modelfleet-cost -->\n### modelfleet cost preview\n")
    assert "| prod (on-demand) | 180,221.87 / 196,899.66 / 296,028.75 | ✅ 79% of 250,000.00 (desired) |" in text
    assert "| dev (spot, assumed 50% of on-demand) | 5,188.34 / 5,188.34 / 5,188.34 |" in text
    # the load behind every unit cost, and a flag where the replicas serve less than the peak
    assert ("| `llama-3-3-70b-instruct` | g6e.12xlarge | 3,829.81 | USD 6.07 per million tokens at 8 seq x 30 tok/s "
            "(default) ⚠️ under-provisioned: 1 replica(s) x max_num_seqs 8 serve 8 of the 32 sequences at peak |") in text
