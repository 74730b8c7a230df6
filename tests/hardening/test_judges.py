"""Real judges on every Kubernetes object we render, for every stack: kubernetes-validate (strict, the
LeaderWorkerSet's pods included as PodTemplates), the CRDs against their vendored schemas, checkov's
Kubernetes checks (each really run, no failures, only the documented skips), and our own restricted Pod
Security check (``pod_security.py``; its own tests are in ``test_pod_security.py``)."""

from __future__ import annotations

import collections
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import STACKS
from tests.hardening.judges import (
    crd_errors,
    is_crd,
    kubernetes_objects,
    lws_pod_templates,
    rollout_pod_template,
    require_executable,
    require_module,
    run_checkov,
)
from tests.hardening.pod_security import check_restricted, pod_templates

pytestmark = pytest.mark.judge

# checkov skips each workload may carry, by its app.kubernetes.io/component label, and why (docs/hardening.md,
# "Hardening and benchmarks"); CKV_K8S_43 (image by digest) as well while any of its images is pinned by tag.
EXPECTED_SKIPS = {
    "triton": {"CKV_K8S_15", "CKV_K8S_40"},  # IfNotPresent; uid 1000 is the image's own user
    "vllm": {"CKV_K8S_15", "CKV_K8S_22", "CKV_K8S_23", "CKV_K8S_40"},  # IfNotPresent; the image runs as root
    "device-plugin": {"CKV_K8S_8", "CKV_K8S_9", "CKV_K8S_15", "CKV_K8S_23", "CKV_K8S_40"},  # NVIDIA's static manifest
}
DIGEST_CHECK = "CKV_K8S_43"
# Container checks checkov runs on every kind that holds a pod (PodTemplate included): each must have run.
CONTAINER_CHECKS = {f"CKV_K8S_{n}" for n in (8, 9, 10, 11, 12, 13, 14, 15, 16, 20, 22, 25, 26, 28, 30, 37, 39, 43)}
# ... and those it runs on workload kinds only (not on PodTemplate).
WORKLOAD_CHECKS = CONTAINER_CHECKS | {f"CKV_K8S_{n}" for n in (17, 18, 19, 21, 23, 29, 31, 38, 40)}
CHECKED_KINDS = {"Deployment": WORKLOAD_CHECKS, "DaemonSet": WORKLOAD_CHECKS, "StatefulSet": WORKLOAD_CHECKS,
                 "PodTemplate": CONTAINER_CHECKS, "Service": {"CKV_K8S_21"}, "ServiceAccount": {"CKV_K8S_21"}}
# Known defects, routed to their owners; each has a strict xfail test below that fails once it is fixed.
KNOWN_PSS_DEFECTS: set[tuple[str, str]] = set()


def manifests(project, stack: str) -> list[dict[str, Any]]:
    return kubernetes_objects(project.rendered(stack)[1])


def judged_objects(project, stack: str) -> list[dict[str, Any]]:
    """What the judges see: every rendered object, and each LeaderWorkerSet's pods as PodTemplates."""
    objects = manifests(project, stack)
    return objects + [t for o in objects if o["kind"] == "LeaderWorkerSet" for t in lws_pod_templates(o)] + [
        rollout_pod_template(o) for o in objects if o["kind"] == "Rollout"]


@pytest.mark.parametrize("stack", STACKS)
def test_the_example_renders_every_kind_the_judges_must_see(project, stack):
    kinds = collections.Counter(o["kind"] for o in judged_objects(project, stack))
    assert {"Deployment", "Service", "ServiceAccount", "ServiceMonitor", "NetworkPolicy", "PodDisruptionBudget",
            "Namespace", "DaemonSet"} <= set(kinds), kinds
    if stack == "prod":  # the 405B model: a LeaderWorkerSet, its two templates judged as PodTemplates
        assert kinds["LeaderWorkerSet"] >= 1
    assert kinds["PodTemplate"] == 2 * kinds["LeaderWorkerSet"] + kinds["Rollout"]


@pytest.mark.parametrize("stack", STACKS)
def test_kubernetes_validate_strict(project, stack):
    kubernetes_validate = require_module("kubernetes_validate")
    version = project.environment(stack).kubernetes_version
    checked = collections.Counter()
    for obj in judged_objects(project, stack):
        if not is_crd(obj):
            kubernetes_validate.validate(obj, version, strict=True)
            checked[obj["kind"]] += 1
    crds = sum(is_crd(o) for o in judged_objects(project, stack))
    assert sum(checked.values()) + crds == len(judged_objects(project, stack)), "every object is judged by one schema"
    assert checked["Deployment"] + checked["PodTemplate"] >= 2 and checked["Service"] >= 2, checked


@pytest.mark.parametrize("stack", STACKS)
def test_crd_objects_match_their_vendored_schemas(project, stack):
    crds = [o for o in manifests(project, stack) if is_crd(o)]
    assert {o["kind"] for o in crds} >= {"ServiceMonitor"} | ({"LeaderWorkerSet"} if stack == "prod" else set())
    for obj in crds:
        assert crd_errors(obj) == [], (obj["kind"], obj["metadata"]["name"])


def _lws(project) -> dict[str, Any]:
    return next(o for o in manifests(project, "prod") if o["kind"] == "LeaderWorkerSet")


@pytest.mark.parametrize(("path", "value", "expected"), [
    (("spec", "leaderWorkerTemplate", "size"), 0, "less than the minimum"),
    (("spec", "leaderWorkerTemplate", "restartPolicy"), "Always", "is not one of"),
    (("spec", "startupPolicy"), "Eventually", "is not one of"),
    (("spec", "rolloutStrategy", "rollingUpdateConfiguration", "maxSurge"), "one", "is not valid under any"),
    (("spec", "replicas"), 2**31, "greater than the maximum"),
    (("spec", "leaderWorkerTemplate", "workerTemplate", "spec"), {"volumes": []}, "'containers' is a required"),
    (("spec", "leaderWorkerTemplate", "sizee"), 2, "Additional properties"),
    (("metadata", "name"), "Llama_405B", "does not match"),
])
def test_the_lws_schema_rejects_what_the_crd_rejects(project, path, value, expected):
    obj = copy.deepcopy(_lws(project))
    parent = obj
    for key in path[:-1]:
        parent = parent[key]
    parent[path[-1]] = value
    assert any(expected in e for e in crd_errors(obj)), crd_errors(obj)


@pytest.mark.parametrize(("change", "expected"), [
    (lambda o: o["spec"].pop("selector"), "'selector' is a required"),
    (lambda o: o["spec"]["endpoints"][0].update(interval="15 seconds"), "does not match"),
    (lambda o: o["spec"]["endpoints"][0].update(scheme="ftp"), "is not one of"),
    (lambda o: o["spec"].update(endpoint=[]), "Additional properties"),
])
def test_the_service_monitor_schema_rejects_what_the_crd_rejects(project, change, expected):
    obj = copy.deepcopy(next(o for o in manifests(project, "prod") if o["kind"] == "ServiceMonitor"))
    change(obj)
    assert any(expected in e for e in crd_errors(obj)), crd_errors(obj)


def test_a_broken_lws_pod_fails_kubernetes_validate(project):
    kubernetes_validate = require_module("kubernetes_validate")
    obj = copy.deepcopy(_lws(project))
    obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["resources"]["limits"]["cpu"] = [4]
    leader, worker = lws_pod_templates(obj)
    kubernetes_validate.validate(leader, "1.33", strict=True)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(worker, "1.33", strict=True)


# --- checkov -------------------------------------------------------------------------------------------------


def _resource_id(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}.{obj['metadata'].get('namespace', 'default')}.{obj['metadata']['name']}"


def expected_skips(obj: dict[str, Any]) -> set[str]:
    if not any(True for _ in pod_templates(obj)):
        return set()  # the skips are about containers; a Service or ServiceAccount has none
    component = obj["metadata"].get("labels", {}).get("app.kubernetes.io/component")
    images = [c["image"] for _, t in pod_templates(obj) for key in ("initContainers", "containers")
              for c in t["spec"].get(key, [])]
    tag_pinned = any("@sha256:" not in image for image in images)
    expected = EXPECTED_SKIPS.get(component, set()) | ({DIGEST_CHECK} if tag_pinned else set())
    return expected & CHECKED_KINDS[obj["kind"]]  # checkov skips only what it runs on that kind


def checkov_findings(report: dict[str, Any], objects: list[dict[str, Any]]) -> list[str]:
    """Everything wrong with a checkov report on ``objects``: failures, parsing errors, resources or checks
    that did not run, skips without a reason, skips other than the documented ones."""
    summary, results = report["summary"], report["results"]
    findings = [f"failed {c['check_id']} on {c['resource']}" for c in results.get("failed_checks", [])]
    findings += [f"parsing error in {p}" for p in results.get("parsing_errors", [])]
    if summary.get("parsing_errors") or summary.get("resource_count", 0) < len(objects):
        findings.append(f"checkov read {summary.get('resource_count')} resources of {len(objects)}: {summary}")
    evaluated: dict[str, set[str]] = collections.defaultdict(set)
    skipped: dict[str, set[str]] = collections.defaultdict(set)
    for check in results.get("passed_checks", []) + results.get("skipped_checks", []):
        evaluated[check["resource"]].add(check["check_id"])
    for check in results.get("skipped_checks", []):
        skipped[check["resource"]].add(check["check_id"])
        if not (check["check_result"].get("suppress_comment") or "").strip():
            findings.append(f"skip of {check['check_id']} on {check['resource']} has no reason")
    for obj in objects:
        resource = _resource_id(obj)
        if obj["kind"] in CHECKED_KINDS and not CHECKED_KINDS[obj["kind"]] <= evaluated[resource]:
            findings.append(f"{resource}: checks not run: {sorted(CHECKED_KINDS[obj['kind']] - evaluated[resource])}")
        if obj["kind"] in CHECKED_KINDS and skipped[resource] != expected_skips(obj):
            findings.append(f"{resource}: skipped {sorted(skipped[resource])}, expected {sorted(expected_skips(obj))}")
    return findings


def checkov_report(objects: list[dict[str, Any]], directory: Path) -> dict[str, Any]:
    for index, obj in enumerate(objects):
        (directory / f"{index:03d}-{obj['kind'].lower()}.yaml").write_text(yaml.safe_dump(obj, sort_keys=True))
    return run_checkov(directory)


@pytest.mark.parametrize("stack", STACKS)
def test_checkov_runs_every_check_with_only_the_documented_skips(project, stack, tmp_path):
    objects = judged_objects(project, stack)
    report = checkov_report(objects, tmp_path)
    assert checkov_findings(report, objects) == []
    assert report["summary"]["passed"] >= 50 * sum(o["kind"] in ("Deployment", "DaemonSet") for o in objects)


def test_checkov_findings_catch_a_failure_an_unreasoned_skip_and_an_unread_file(project, tmp_path):
    """The judge of the judge: a privileged container, a skip without a reason, and a Deployment in a file
    checkov cannot parse (it says nothing about such a file: no parsing error, no resource) must all be
    reported."""
    objects = copy.deepcopy([o for o in judged_objects(project, "prod") if o["kind"] in ("Deployment", "PodTemplate")])
    triton = next(o for o in objects if o["metadata"]["labels"]["app.kubernetes.io/component"] == "triton")
    pod = triton["template"] if triton["kind"] == "PodTemplate" else triton["spec"]["template"]  # a canary's Rollout
    pod["spec"]["containers"][0]["securityContext"]["privileged"] = True
    worker = next(o for o in objects if o["kind"] == "PodTemplate")
    key = next(k for k, v in worker["metadata"]["annotations"].items() if v.startswith("CKV_K8S_22="))
    worker["metadata"]["annotations"][key] = "CKV_K8S_22="
    unread = copy.deepcopy(triton) | {"metadata": {**triton["metadata"], "name": "unread"}}
    (tmp_path / "unread.yaml").write_text(yaml.safe_dump(unread) + "\t{[\n")
    findings = checkov_findings(checkov_report(objects, tmp_path), objects + [unread])
    assert f"failed CKV_K8S_16 on {_resource_id(triton)}" in findings, findings
    assert f"skip of CKV_K8S_22 on {_resource_id(worker)} has no reason" in findings, findings
    assert any(f.startswith(f"{_resource_id(unread)}: checks not run") for f in findings), findings


def test_checkov_without_any_resource_is_an_error(tmp_path):
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    with pytest.raises(AssertionError, match="no Kubernetes report"):
        run_checkov(tmp_path)


# --- restricted Pod Security Standards ---------------------------------------------------------------------


@pytest.mark.parametrize("stack", STACKS)
def test_restricted_pod_security_with_written_exceptions(project, stack):
    objects = judged_objects(project, stack)
    assert sum(1 for o in objects for _ in pod_templates(o)) >= 3
    violations = [v for o in objects for v in check_restricted(o)]
    assert [str(v) for v in violations if (v.workload, v.control) not in KNOWN_PSS_DEFECTS] == []


def test_device_plugin_writes_its_hostpath_exception(project):
    plugin = next(o for o in manifests(project, "prod") if o["kind"] == "DaemonSet")
    assert [str(v) for v in check_restricted(plugin)] == []


# --- a judge that is not installed ---------------------------------------------------------------------------


def test_a_missing_judge_skips_locally_but_fails_in_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception):
        require_module("no_such_judge_installed")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="must not be skipped in CI"):
        require_module("no_such_judge_installed")
    with pytest.raises(pytest.fail.Exception, match="must not be skipped in CI"):
        require_executable("no-such-judge-installed")
