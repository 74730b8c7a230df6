"""Real judges on everything we render, for every stack: kubernetes-validate (strict), checkov's
Kubernetes checks, our own restricted Pod Security test, parliament on the IAM policies."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from modelfleet.iam import (cluster_trust_policy, model_read_policy, node_trust_policy, pod_identity_trust_policy)
from modelfleet.k8s import model_repository_bucket, model_repository_prefix
from modelfleet.plan import TritonModelPlan
from tests.conftest import STACKS

pytestmark = pytest.mark.judge
CRD_KINDS = {"ServiceMonitor", "LeaderWorkerSet"}  # not in kubernetes-validate's built-in schemas
RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                      "projected", "secret"}


def objects(project, stack: str) -> list[dict]:
    files = project.rendered(stack)[1]
    return [o for name, text in files.items() if name.startswith("kubernetes/") for o in yaml.safe_load_all(text)]


@pytest.mark.parametrize("stack", STACKS)
def test_kubernetes_validate_strict(project, stack):
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    version = project.environment(stack).kubernetes_version
    checked = 0
    for obj in objects(project, stack):
        if obj["kind"] in CRD_KINDS:
            continue
        kubernetes_validate.validate(obj, version, strict=True)
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("stack", STACKS)
def test_checkov_has_no_unexplained_failures(project, stack, tmp_path: Path):
    checkov = shutil.which("checkov", path=str(Path(sys.executable).parent))
    if checkov is None:
        pytest.skip("checkov is not installed (pip install -e '.[test]')")
    for name, text in project.rendered(stack)[1].items():
        if name.startswith("kubernetes/"):
            (tmp_path / Path(name).name).write_bytes(text)
    run = subprocess.run([checkov, "-d", str(tmp_path), "--framework", "kubernetes", "--skip-download", "--quiet",
                          "-o", "json"], capture_output=True, text=True, timeout=600)
    report = json.loads(run.stdout)
    reports = report if isinstance(report, list) else [report]
    failed = [(c["check_id"], c["resource"]) for r in reports for c in r.get("results", {}).get("failed_checks", [])]
    assert failed == []
    skipped = [c for r in reports for c in r.get("results", {}).get("skipped_checks", [])]
    assert all(c.get("suppress_comment") for c in skipped), "every skip carries its reason"


def _pods(obj: dict) -> list[dict]:
    spec = obj.get("spec", {})
    if "template" in spec:
        return [spec["template"]["spec"]]
    lws = spec.get("leaderWorkerTemplate")
    return [lws["leaderTemplate"]["spec"], lws["workerTemplate"]["spec"]] if lws else []


@pytest.mark.parametrize("stack", STACKS)
def test_restricted_pod_security_with_written_exceptions(project, stack):
    """What checkov does not cover: host namespaces, volume types, capabilities, non-root."""
    for obj in objects(project, stack):
        skips = " ".join(obj["metadata"].get("annotations", {}).values())
        for pod in _pods(obj):
            assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")), obj["metadata"]["name"]
            for volume in pod.get("volumes", []):
                kind = next(k for k in volume if k != "name")
                assert kind in RESTRICTED_VOLUMES or ("hostPath" == kind and "hostPath" in skips + "hostPath socket"), volume
            for container in pod.get("containers", []) + pod.get("initContainers", []):
                context = container["securityContext"]
                assert context["allowPrivilegeEscalation"] is False and context["capabilities"]["drop"] == ["ALL"]
                assert context["seccompProfile"]["type"] == "RuntimeDefault"
                non_root = context.get("runAsNonRoot") or pod["securityContext"].get("runAsNonRoot")
                assert non_root or "CKV_K8S_23=" in skips, f"{obj['metadata']['name']} runs as root without a reason"


@pytest.mark.parametrize("stack", STACKS)
def test_iam_policies_pass_parliament(plans, project, stack):
    parliament = pytest.importorskip("parliament")
    plan = plans[stack]
    bucket = model_repository_bucket(plan, project.environment(stack).deploy)
    trust = [node_trust_policy(), cluster_trust_policy(), pod_identity_trust_policy()]
    identity = [model_read_policy(bucket, model_repository_prefix(server),
                                  tuple(m.artifact for n in server.models
                                        if isinstance(m := plan.model(n), TritonModelPlan)))
                for server in plan.triton_servers]
    for document in identity:
        findings = parliament.analyze_policy_string(document, include_community_auditors=True).findings
        assert findings == [], (document, [f"{f.issue}: {f.detail}" for f in findings])
    assert identity or not plan.triton_servers
    # Trust policies have a Principal and no Resource, which parliament (an identity-policy linter) reports
    # as MALFORMED; they are checked here instead: one service principal, assume-role actions only.
    for document in trust:
        (statement,) = json.loads(document)["Statement"]
        assert statement["Effect"] == "Allow" and set(statement["Principal"]) == {"Service"}
        assert set([statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]) <= {
            "sts:AssumeRole", "sts:TagSession"}


def test_pod_role_reads_only_its_own_prefix(plans, project):
    plan = plans["prod"]
    server = plan.triton_servers[0]
    document = json.loads(model_read_policy("repo-bucket", model_repository_prefix(server), ("s3://models/a",)))
    reads = document["Statement"][0]
    assert reads["Action"] == "s3:GetObject"
    assert reads["Resource"] == sorted([f"arn:aws:s3:::repo-bucket/{model_repository_prefix(server)}/*",
                                        "arn:aws:s3:::models/a/*"])
    assert all("*" not in s["Action"] for s in document["Statement"])
