"""Every GPU series an alert or panel names is one NVIDIA's DCGM exporter publishes by default: checked against
its counters file parsed here (the shared reference's copy where it is beside the checkout, else the shipped one,
which test_dcgm_exporter.py holds equal to it), on every stack's rules and dashboards and on fleets drawn at
random (derandomized), not only the example's."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings

from modelfleet.errors import CompileError, SpecError
from modelfleet.project import Project
from modelfleet.render.observability import gpu_metrics
from tests.conftest import ROOT, STACKS
from tests.hardening.fuzz_inputs import valid_documents
from tests.observability.metric_names import by_source, exprs, names_in
from tests.observability.test_dcgm_exporter import SHARED_CSV


def catalogue() -> dict[str, str]:
    """Field -> type of every counter the exporter's file enables, parsed independently of gpu_metrics."""
    source = SHARED_CSV if SHARED_CSV.is_file() else gpu_metrics.CATALOGUE_FILE
    found = {}
    for line in source.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            fields = [part.strip() for part in line.split(",")]
            found[fields[0]] = fields[1]
    return found


def check(plan, cost) -> set[str]:
    names = by_source(names_in(exprs(plan, cost)))
    published = {name for name, kind in catalogue().items() if kind in ("gauge", "counter")}
    assert names["dcgm"] <= published, sorted(names["dcgm"] - published)
    assert names["other"] == set(), names["other"]
    return names["dcgm"]


@pytest.mark.parametrize("stack", STACKS)
def test_every_dcgm_series_of_every_stack_is_in_the_exporters_catalogue(project, stack):
    plan, cost = project.plan_and_cost(stack)
    used = check(plan, cost)
    assert used == {gpu_metrics.GPU_UTIL, gpu_metrics.FB_USED, gpu_metrics.FB_FREE, gpu_metrics.POWER,
                    gpu_metrics.XID}


_MODELS = Path(tempfile.mkdtemp(prefix="modelfleet-gpu-names-")) / "models.yaml"


@settings(max_examples=4, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much])
@given(document=valid_documents())
def test_fleets_not_given_name_only_catalogued_series(document):
    _MODELS.write_text(yaml.safe_dump(document, sort_keys=False))
    project = Project(root=str(ROOT), models_file=str(_MODELS))
    try:
        plan, cost = project.plan_and_cost("prod")
    except (SpecError, CompileError):  # a located refusal: no plan to check
        assume(False)
    check(plan, cost)


@pytest.mark.judge
def test_the_gpu_panels_answer_from_dcgm_series_of_this_workload_and_group_only(project, tmp_path):
    """Evaluated by promtool on the exporter's series shapes (its labels as the ServiceMonitor keeps them): a
    workload's row counts the GPUs its pods hold and not another workload's; the node-group row every GPU of the
    group, held or idle."""
    from modelfleet.render.observability import fleet_dashboard, workload_dashboard
    from tests.observability import promtool

    plan, cost = project.plan_and_cost("prod")
    llm = plan.model("llama-3-1-8b-instruct")
    mine, other = f"{llm.name}-5c7b9d8f6-q8w2e", f"{llm.name}-extra-5c7b9d8f6-q8w2e"

    def gpu(pod: str | None, index: str, used: int, xid: int) -> list[dict[str, str]]:
        held = f'namespace="{plan.namespace}",pod="{pod}",' if pod else ""
        labels = f'{{{held}gpu="{index}",Hostname="ip-10-0-1-2",node_group="{llm.node_group}"}}'
        return [{"series": f"{name}{labels}", "values": f"{value}x5"} for name, value in (
            ("DCGM_FI_DEV_FB_USED", used), ("DCGM_FI_DEV_FB_FREE", 1000 - used), ("DCGM_FI_DEV_GPU_UTIL", used // 10),
            ("DCGM_FI_DEV_POWER_USAGE", 100), ("DCGM_FI_DEV_XID_ERRORS", xid))]
    series = gpu(mine, "0", 600, 0) + gpu(other, "1", 900, 79) + gpu(None, "2", 0, 0)
    panels = {p.title: p.queries for row in workload_dashboard(plan, llm).rows if row.title == "GPUs"
              for p in row.panels}
    groups = {p.title: p.queries for row in fleet_dashboard(plan, cost).rows
              if row.title == "GPUs by node group" for p in row.panels}
    group = next(q for q in groups["GPU power"] if q.legend == llm.node_group)
    expected = [(panels["GPU memory"][0], 600), (panels["GPU memory"][1], 400), (panels["GPU utilisation"][0], 0.6),
                (panels["Fullest GPU's memory"][0], 0.6), (panels["GPU power"][0], 100),
                (panels["GPUs with an XID error"][0], 0), (group, 300)]
    tests = [{"expr": q.expr, "eval_time": "2m", "exp_samples": [{"labels": "{}", "value": value}]}
             for q, value in expected]
    (tmp_path / "test.yaml").write_text(yaml.safe_dump({"rule_files": [], "tests": [
        {"interval": "1m", "input_series": series, "promql_expr_test": tests}]}))
    result = promtool.run("test", "rules", str(tmp_path / "test.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr

