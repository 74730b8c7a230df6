"""`cost` and the cost fields of `plan --json` / `render` on the example project."""

from __future__ import annotations

import json
import shutil

import pytest

from modelfleet.cli import main
from modelfleet.project import Project
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
    assert prod["monthly_usd"] == {"desired": 216207.53, "max": 431040.52, "min": 197413.39}
    assert prod["budget"]["over"] is False and prod["budget"]["budget_usd"] == 250000.0
    assert prod["policy_violations"] == []
    assert prod["node_groups"][3]["usd_per_node_hour"] == 21.957642  # prices keep their published precision
    assert list(prod) == sorted(prod)


def test_plan_json_gains_monthly_cost_usd(capsys):
    doc = json.loads(_run(capsys, "plan", "--stack", "prod", "--json"))
    assert doc["monthly_cost_usd"] == {"desired": 216207.53, "max": 431040.52, "min": 197413.39}
    groups = {g["instance_type"]: g["monthly_cost_usd"] for g in doc["node_groups"]}
    # 4/4/8 x (55.04 x 730 + 16): max holds 3 replicas and a rollout's surge one, 2 nodes each
    assert groups["p5.48xlarge"] == {"desired": 160780.8, "max": 321561.6, "min": 160780.8}
    models = {m["name"]: m["monthly_cost_usd"]["desired"] for m in doc["models"]}
    assert models["llama-3-3-70b-instruct"] == 48135.24  # 3 x (21.957642 x 730 + 16)
    assert sum(models.values()) == pytest.approx(doc["monthly_cost_usd"]["desired"], abs=0.05)


def test_render_writes_the_same_costs_into_plan_json(tmp_path, capsys):
    _run(capsys, "render", "--stack", "dev", "--out", str(tmp_path / "dev"))
    doc = json.loads((tmp_path / "dev" / "plan.json").read_text())
    # g6e.12xlarge 6.015 x 730 + 16 = 4,406.95, g6e.xlarge 1.1975 x 730 + 16 = 890.175, 2 g5.xlarge 2 x (0.4507 x 730
    # + 16) = 690.022 (the table's dated spot prices, and each node's 16.00 of EBS): 5,987.147
    assert doc["monthly_cost_usd"]["desired"] == 5987.15


def test_markdown_preview_is_a_pr_comment(capsys):
    text = _run(capsys, "cost", "--format", "markdown")
    assert text.startswith("<!-- modelfleet-cost -->\n### modelfleet cost preview\n")
    assert "| prod (on-demand) | 197,413.39 / 216,207.53 / 431,040.52 | ✅ 86% of 250,000.00 (desired) |" in text
    # dev's max: every workload's rollout surge (single replicas) doubles its nodes: 2 x 5,987.147
    assert "| dev (spot, dated table) | 5,987.15 / 5,987.15 / 11,974.29 |" in text
    # the load behind every unit cost, and a flag where the replicas serve less than the peak
    dev = Project(root=str(ROOT)).plan("dev").model("llama-3-3-70b-instruct")
    served = dev.estimates.output_tokens_per_s_per_replica  # one replica, priced at what it generates
    assert (f"| `llama-3-3-70b-instruct` | g6e.12xlarge | 4,406.95 | USD {4_406.95 / 730 / (served * 3600) * 1e6:.3g} "
            f"per million tokens at {served:,.0f} tok/s predicted ⚠️ misses the SLA: 1 replica(s) at peak, p99 TTFT "
            f"{dev.estimates.ttft_p99_ms:,.0f} ms (95% bound {dev.estimates.ttft_p99_bound_ms:,.0f}) against 10,000 ms | "
            "TTFT p99 ") in text


def test_a_created_cluster_has_its_own_lines_in_every_format(tmp_path, capsys):
    import shutil

    from tests.cost.test_diff import _creating_prod
    shutil.copy(ROOT / "models.yaml", tmp_path / "models.yaml")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    _creating_prod(tmp_path)
    argv = ["--project", str(tmp_path), "cost", "--stack", "prod"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "  EKS control plane            73.00 every month\n" in text
    # 2 x (0.1008 x 730 + 50 GiB x 0.08 EBS) = 155.17 at min and desired, 4 x 77.584 = 310.34 at max
    assert ("  system nodes (on-demand)     m7i.large          0.1008  2-2-4     155.17 / 155.17 / 310.34\n"
            "                                 + per node and month: 50 GiB gp3 at 3000 IOPS, 125 MiB/s = 4.00 USD EBS\n"
            ) in text
    # 197,413.39 + 73.00 + 155.17; 216,207.53 + 228.17; 431,040.52 + 73.00 + 310.34
    assert [line.split()[1:] for line in text.splitlines() if line.startswith("  total")] == [
        ["197,641.56", "/", "216,435.69", "/", "431,423.86"]]
    assert "  prices: system nodes us-east-1 (on-demand): AWS Pricing API" in text
    assert main([*argv, "--format", "markdown"]) == 0
    assert ("- cluster created by this stack: EKS control plane 73.00; system nodes 2-2-4 x m7i.large on-demand at "
            "0.1008 USD/h, each with 50 GiB gp3 at 3000 IOPS, 125 MiB/s = 4.00 USD EBS a month: 155.17 / 155.17 / "
            "310.34 USD/month (min / desired / max)") in capsys.readouterr().out
    assert main([*argv, "--format", "json"]) == 0
    prod = json.loads(capsys.readouterr().out)["environments"]["prod"]
    assert prod["system_nodes"] == {
        "capacity_type": "on-demand", "instance_type": "m7i.large", "monthly_usd": {"desired": 155.17, "max": 310.34,
        "min": 155.17}, "name": "system", "nodes": [2, 2, 4], "price_basis": "on-demand", "usd_per_node_hour": 0.1008,
        "volume": "50 GiB gp3 at 3000 IOPS, 125 MiB/s", "volume_usd_per_node_month": 4.0, "idle_saving_usd_per_hour": 0.0,
        "monthly_range_usd": None, "on_demand_base_nodes": 0, "range_basis": "", "reserved_nodes": 0}
    assert prod["control_plane_monthly_usd"] == 73.0 and prod["monthly_usd"]["desired"] == 216435.69


@pytest.mark.parametrize("contents", [(), ("stacks/",), ("README.md",)])
def test_a_base_directory_without_models_yaml_is_an_argument_error(tmp_path, capsys, contents):
    """Defect 9: every stack was reported as not compiling, with exit 0."""
    for name in contents:
        (tmp_path / name).mkdir() if name.endswith("/") else (tmp_path / name).write_text("notes\n")
    code = main(["--project", str(ROOT), "cost", "--base", str(tmp_path), "--format", "markdown"])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert err.splitlines()[0] == (f"--base: {tmp_path} has no models.yaml (pass a directory with models.yaml and "
                                   "optionally stacks/, a models.yaml file, or a git ref)")


def test_cost_base_names_a_version_bump_as_the_only_change(tmp_path, capsys):
    """#15: bumping fraud-scorer 1 -> 2 is named in ``cost --base`` (costing nothing), with the server it rolls."""
    pinned = "    artifact: s3://acme-ml-models/triton/fraud-scorer\n    version: 1\n"
    text = (ROOT / "models.yaml").read_text()
    assert text.count(pinned) == 1
    (tmp_path / "models.yaml").write_text(text.replace(pinned, pinned.replace("version: 1", "version: 2")))
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    out = _run(capsys, "cost", "--stack", "prod", "--models", str(tmp_path / "models.yaml"),
               "--base", str(ROOT / "models.yaml"))
    server = Project(root=str(ROOT)).plan("prod").model("fraud-scorer").server
    lines = [line.strip() for line in out.splitlines()]
    assert (f"- fraud-scorer: version 1 -> 2, rolls {server} alone as a canary 10% -> 100%, 10 min each, gated by "
            "its SLA analysis") in lines, out
    changed = [line.split()[1:3] for line in lines if line.startswith("changed ")]
    assert changed == [["fraud-scorer", "0.00"]], out
