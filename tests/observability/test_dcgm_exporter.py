"""NVIDIA's DCGM exporter: installed with a ServiceMonitor where the stack creates its cluster (the real
prometheus-operator CRD judges the ServiceMonitor, kubernetes-validate the rest), on the GPU nodes only, tolerating
their taint, with the requests the fit check leaves free for it; required of a joined cluster (``doctor``); and the
counters catalogue the GPU panels and alerts are checked against is the exporter's own file, unchanged."""

from __future__ import annotations

import hashlib

from functools import cache
from pathlib import Path

import jsonschema
import pytest
import yaml

from modelfleet.commands.doctor import stack_objects
from modelfleet.deploy.node_groups import GPU_TAINT
from modelfleet.deploy.prerequisites import Probe, required_prerequisites
from modelfleet.render.k8s import CLUSTER
from modelfleet.render.manifests import render_fleet_manifests
from modelfleet.render.k8s import common as c
from modelfleet.render.k8s.dcgm_exporter import DCGM_EXPORTER, render_dcgm_exporter
from modelfleet.render.observability import gpu_metrics
from modelfleet.spec.environment import DCGM_EXPORTER_CPU, DCGM_EXPORTER_MEMORY_GIB, parse_environment
from tests.conftest import ROOT, STACKS
from tests.hardening.judges import require_module, run_checkov, strict_schema

CRD = Path(__file__).resolve().parent / "crds" / "monitoring.coreos.com_servicemonitors.yaml"
# the shared reference (../shared beside a checkout; a worktree's is further up); absent on CI's clean clone
SHARED_CSV = next((p / "shared" / "metrics" / "dcgm-exporter-default-counters.csv" for p in ROOT.parents
                   if (p / "shared" / "metrics").is_dir()), Path("/nonexistent"))


def created(project, stack: str):
    """The stack as if it created its cluster."""
    config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
    config["modelfleet:cluster"] = {"create": True, "publicAccessCidrs": [], "subnetIds": ["subnet-01", "subnet-02"]}
    return parse_environment(stack, config, families=project.catalogue().families())


def exporter(plan) -> dict[str, dict]:
    return {o["kind"]: o for o in render_dcgm_exporter(plan)}


@cache
def _validator():
    crd = yaml.safe_load(CRD.read_text())
    schema = next(v for v in crd["spec"]["versions"] if v["name"] == "v1")["schema"]["openAPIV3Schema"]
    return jsonschema.Draft7Validator(strict_schema(schema))


# SHA-256 of NVIDIA/dcgm-exporter's etc/default-counters.csv at d5e5f51 (4.5.3-4.8.2-1), as the shared
# reference holds it: the shipped copy is checked against it on any checkout, and against the file itself
# where the shared reference is beside the checkout.
UPSTREAM_SHA256 = "13d8c92cffa649f17c4c0938bb16707daf27260e845c77eacf89dbb68a46eaf9"


def test_the_shipped_catalogue_is_the_exporters_file_unchanged():
    shipped = gpu_metrics.CATALOGUE_FILE.read_bytes()
    assert hashlib.sha256(shipped).hexdigest() == UPSTREAM_SHA256
    if SHARED_CSV.is_file():
        assert shipped == SHARED_CSV.read_bytes()


def test_the_catalogue_parses_enabled_counters_only():
    counters = gpu_metrics.default_counters()
    assert counters[gpu_metrics.XID] == "gauge" and counters[gpu_metrics.FB_USED] == "gauge"
    assert "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL" not in counters  # shipped commented out
    assert counters["DCGM_FI_DRIVER_VERSION"] == "label"
    for name in ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DRIVER_VERSION", "DCGM_FI_DEV_GPU_UTILIZATION"):
        with pytest.raises(ValueError, match="not a series dcgm-exporter publishes"):
            gpu_metrics.counter(name)


@pytest.mark.parametrize("stack", STACKS)
def test_a_created_cluster_runs_the_exporter_and_a_joined_one_does_not(project, stack):
    plan = project.plan_and_cost(stack)[0]
    joined = project.environment(stack)
    kinds = {(o["kind"], o["metadata"]["name"]) for o in render_fleet_manifests(plan, joined.deploy)[CLUSTER]}
    assert ("DaemonSet", DCGM_EXPORTER) not in kinds
    with_it = render_fleet_manifests(plan, joined.deploy, dcgm_exporter=created(project, stack).cluster.create)[CLUSTER]
    assert {("DaemonSet", DCGM_EXPORTER), ("Service", DCGM_EXPORTER), ("ServiceMonitor", DCGM_EXPORTER),
            ("NetworkPolicy", DCGM_EXPORTER)} <= {(o["kind"], o["metadata"]["name"]) for o in with_it}


@pytest.mark.parametrize("stack", STACKS)
def test_the_service_monitor_validates_against_the_real_crd(plans, stack):
    monitor = exporter(plans[stack])["ServiceMonitor"]
    assert [e.message for e in _validator().iter_errors(monitor)] == []
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["honorLabels"] is True and monitor["spec"]["attachMetadata"] == {"node": True}
    relabel = {r["targetLabel"]: r["sourceLabels"] for r in endpoint["relabelings"]}
    assert relabel[gpu_metrics.NODE_GROUP] == ["__meta_kubernetes_node_label_modelfleet_io_node_group"]


def test_the_crd_judge_rejects_a_wrong_field(plans):
    monitor = exporter(plans["prod"])["ServiceMonitor"]
    monitor["spec"]["endpoints"][0]["honourLabels"] = True
    assert list(_validator().iter_errors(monitor))


@pytest.mark.parametrize("stack", STACKS)
def test_the_other_objects_validate_against_kubernetes(plans, stack):
    kubernetes_validate = require_module("kubernetes_validate")
    for obj in render_dcgm_exporter(plans[stack]):
        if obj["kind"] != "ServiceMonitor":
            kubernetes_validate.validate(obj, "1.33", strict=True)


@pytest.mark.parametrize("stack", STACKS)
def test_it_runs_on_every_gpu_node_group_and_nowhere_else_tolerating_their_taint(plans, stack):
    plan = plans[stack]
    pod = exporter(plan)["DaemonSet"]["spec"]["template"]["spec"]
    (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (match,) = term["matchExpressions"]
    assert match["key"] == c.NODE_GROUP_LABEL and match["operator"] == "In"
    assert match["values"] == sorted(g.name for g in plan.node_groups if g.device == "gpu")
    assert any(g.device != "gpu" for g in plan.node_groups) or stack == "dev"  # the CPU groups are left out
    tolerated = [t for t in pod["tolerations"] if t["key"] == GPU_TAINT.key]
    assert tolerated and all(t["operator"] == "Exists" and "effect" not in t for t in tolerated)  # any effect


def test_no_gpu_node_group_no_exporter(plans):
    plan = plans["prod"]
    cpu_only = plan.model_copy(update={"node_groups": tuple(g for g in plan.node_groups if g.device != "gpu")})
    assert render_dcgm_exporter(cpu_only) == []


@pytest.mark.parametrize("stack", STACKS)
def test_its_requests_are_what_every_gpu_node_keeps_for_it(plans, stack):
    """One source: the DaemonSet requests the figures the allowance is built from, and every GPU node group's
    allowance (what the fit check leaves free) covers them."""
    plan = plans[stack]
    requests = exporter(plan)["DaemonSet"]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {"cpu": f"{round(DCGM_EXPORTER_CPU * 1000)}m", "memory": f"{round(DCGM_EXPORTER_MEMORY_GIB * 1024)}Mi"}
    for group in (g for g in plan.node_groups if g.device == "gpu"):
        assert group.daemonset_allowance.cpu >= DCGM_EXPORTER_CPU
        assert group.daemonset_allowance.memory_gib >= 1 + DCGM_EXPORTER_MEMORY_GIB


def test_a_joined_cluster_must_run_one_and_a_created_one_installs_it(project):
    plan, files = project.rendered("prod")
    joined = {r.name: r for r in required_prerequisites(project.environment("prod"), plan, stack_objects(files))}
    dcgm = joined["NVIDIA DCGM exporter (or the GPU Operator's)"]
    assert dcgm.probe == Probe("workload", DCGM_EXPORTER) and not dcgm.installed_by_stack
    assert "in any namespace" in str(dcgm.probe)  # the GPU Operator's nvidia-dcgm-exporter is in its own
    assert "serviceMonitor.enabled=true" in dcgm.install
    own = {r.name: r for r in required_prerequisites(created(project, "prod"), plan, stack_objects(files))}
    assert own[dcgm.name].installed_by_stack


@pytest.mark.judge
def test_checkov_passes_it_with_every_exception_written_down(plans, tmp_path):
    (tmp_path / "dcgm.yaml").write_text(yaml.safe_dump_all(render_dcgm_exporter(plans["prod"])))
    report = run_checkov(tmp_path)
    failed = [(c["check_id"], c["resource"]) for c in report["results"]["failed_checks"]]
    assert failed == [] and report["summary"]["passed"] > 0
    skipped = {c["check_id"] for c in report["results"]["skipped_checks"]}
    assert {"CKV_K8S_25", "CKV_K8S_39", "CKV_K8S_40"} <= skipped  # SYS_ADMIN and root, each with its reason


def test_every_restricted_pod_security_exception_is_written_down(plans):
    from tests.hardening.pod_security import check_restricted

    assert [str(v) for v in check_restricted(exporter(plans["prod"])["DaemonSet"])] == []


def test_a_created_clusters_allowance_below_the_exporters_requests_is_a_located_error(tmp_path):
    """The fit check leaves the allowance free on every node: set below the exporter's requests on a stack that
    installs it, the exporter would stay Pending. The error points at the stack file's line."""
    import shutil

    from modelfleet.errors import SpecError
    from modelfleet.project import Project

    for part in ("models.yaml", "stacks", "samples"):
        (shutil.copytree if (ROOT / part).is_dir() else shutil.copy)(ROOT / part, tmp_path / part)
    stack = tmp_path / "stacks" / "Pulumi.dev.yaml"
    text = stack.read_text().replace("  modelfleet:cluster:\n    name: ml-serving-dev\n",
                                     "  modelfleet:cluster:\n    name: ml-serving-dev\n    create: true\n"
                                     "    publicAccessCidrs: []\n    subnetIds: [subnet-01, subnet-02]\n")
    assert "create: true" in text
    stack.write_text(text.replace("  modelfleet:deploy:\n", "  modelfleet:deploy:\n    daemonsetAllowance: {memoryGib: 0.2}\n", 1))
    with pytest.raises(SpecError) as caught:
        Project(root=str(tmp_path)).environment("dev")
    (issue,) = caught.value.issues
    assert issue.path == "config.modelfleet:deploy.daemonsetAllowance.memoryGib" and issue.file.endswith("Pulumi.dev.yaml")
    assert issue.line > 1 and "0.25 GiB" in issue.message and "at least 0.25" in issue.fix
    # a joined cluster brings its own exporter: any allowance is its own to set
    joined = text.replace("    create: true\n", "").replace(
        "  modelfleet:deploy:\n", "  modelfleet:deploy:\n    daemonsetAllowance: {memoryGib: 0.2}\n", 1)
    stack.write_text(joined)
    assert Project(root=str(tmp_path)).environment("dev").deploy.daemonset_allowance.memory_gib == 0.2
