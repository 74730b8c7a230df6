"""The restricted Pod Security check, tested: every violation injected into a copy of a real rendered pod is
found, in every kind of object that holds a pod, and only a written, reasoned exception lets it pass."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.hardening.judges import kubernetes_objects
from tests.hardening.pod_security import CONTROLS, check_restricted, pod_templates

Pod = dict[str, Any]


def _container(pod: Pod) -> dict[str, Any]:
    return pod["spec"]["containers"][0]


def _context(pod: Pod) -> dict[str, Any]:
    return _container(pod)["securityContext"]


def _set(path: str, value: Any) -> Callable[[Pod], None]:
    """Set ``value`` at a dotted path under the pod template ("spec.hostNetwork", "c.privileged" for the
    first container's securityContext, "pc.runAsUser" for the pod's)."""
    def change(pod: Pod) -> None:
        root, *keys = path.split(".")
        node = {"spec": pod["spec"], "c": _context(pod), "pc": pod["spec"].setdefault("securityContext", {})}[root]
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        node[keys[-1]] = value
    return change


def _drop(*keys: str) -> Callable[[Pod], None]:
    def change(pod: Pod) -> None:
        for key in keys:
            _context(pod).pop(key, None)
            pod["spec"].get("securityContext", {}).pop(key, None)
    return change


def _add_volume(volume: dict[str, Any]) -> Callable[[Pod], None]:
    return lambda pod: pod["spec"].setdefault("volumes", []).append(volume)


def _append(key: str, item: dict[str, Any]) -> Callable[[Pod], None]:
    return lambda pod: pod["spec"].setdefault(key, []).append(item)


INJECTIONS: dict[str, tuple[str, Callable[[Pod], None]]] = {
    "hostPath /etc": ("volumeTypes", _add_volume({"name": "etc", "hostPath": {"path": "/etc"}})),
    "nfs volume": ("volumeTypes", _add_volume({"name": "n", "nfs": {"server": "s", "path": "/"}})),
    "hostNetwork": ("hostNetwork", _set("spec.hostNetwork", True)),
    "hostPID": ("hostPID", _set("spec.hostPID", True)),
    "hostIPC": ("hostIPC", _set("spec.hostIPC", True)),
    "privileged": ("privileged", _set("c.privileged", True)),
    "privilege escalation allowed": ("allowPrivilegeEscalation", _set("c.allowPrivilegeEscalation", True)),
    "privilege escalation unset": ("allowPrivilegeEscalation", _drop("allowPrivilegeEscalation")),
    "capabilities add SYS_ADMIN": ("capabilities", _set("c.capabilities.add", ["SYS_ADMIN"])),
    "capabilities drop NET_RAW only": ("capabilities", _set("c.capabilities.drop", ["NET_RAW"])),
    "hostPort": ("hostPorts", lambda pod: _container(pod).setdefault("ports", []).append(
        {"containerPort": 9999, "hostPort": 9999})),
    "runAsUser 0 on the pod": ("runAsUser", _set("pc.runAsUser", 0)),
    "runAsUser 0 on the container": ("runAsUser", _set("c.runAsUser", 0)),
    "runAsNonRoot false on the container": ("runAsNonRoot", _set("c.runAsNonRoot", False)),
    "runAsNonRoot unset": ("runAsNonRoot", _drop("runAsNonRoot")),
    "seccomp Unconfined on the container": ("seccompProfile", _set("c.seccompProfile", {"type": "Unconfined"})),
    "seccomp Unconfined on the pod": ("seccompProfile", _set("pc.seccompProfile", {"type": "Unconfined"})),
    "seccomp unset": ("seccompProfile", _drop("seccompProfile")),
    "unsafe sysctl": ("sysctls", _set("pc.sysctls", [{"name": "kernel.msgmax", "value": "65536"}])),
    "procMount Unmasked": ("procMount", _set("c.procMount", "Unmasked")),
    "AppArmor Unconfined": ("appArmor", _set("c.appArmorProfile", {"type": "Unconfined"})),
    "AppArmor annotation": ("appArmor", lambda pod: pod.setdefault("metadata", {}).setdefault("annotations", {})
                            .update({"container.apparmor.security.beta.kubernetes.io/triton": "unconfined"})),
    "SELinux spc_t": ("seLinux", _set("pc.seLinuxOptions", {"type": "spc_t"})),
    "Windows hostProcess": ("hostProcess", _set("c.windowsOptions", {"hostProcess": True})),
    "privileged init container": ("privileged", _append("initContainers", {
        "name": "init", "image": "busybox", "securityContext": {
            "privileged": True, "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}})),
    "ephemeral container without a securityContext": ("allowPrivilegeEscalation", _append(
        "ephemeralContainers", {"name": "debug", "image": "busybox"})),
}


def _wrap(kind: str, template: Pod) -> dict[str, Any]:
    """``template`` inside an object of ``kind``, as the API writes each."""
    meta = {"name": "probe", "namespace": "modelfleet"}
    selector = {"matchLabels": {"app": "probe"}}
    spec = {"Deployment": {"selector": selector, "template": template},
            "DaemonSet": {"selector": selector, "template": template},
            "StatefulSet": {"selector": selector, "serviceName": "probe", "template": template},
            "ReplicaSet": {"selector": selector, "template": template},
            "Job": {"template": template},
            "CronJob": {"schedule": "@daily", "jobTemplate": {"spec": {"template": template}}},
            "LeaderWorkerSet": {"leaderWorkerTemplate": {"size": 2, "leaderTemplate": template,
                                                         "workerTemplate": template}}}
    if kind == "Pod":
        return {"kind": "Pod", "metadata": {**meta, **template.get("metadata", {})}, "spec": template["spec"]}
    if kind == "PodTemplate":
        return {"kind": "PodTemplate", "metadata": meta, "template": template}
    return {"kind": kind, "metadata": meta, "spec": spec[kind]}


KINDS = ("Pod", "PodTemplate", "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet", "Job", "CronJob",
         "LeaderWorkerSet")


@pytest.fixture(scope="module")
def triton_pod(project) -> Pod:
    """A real rendered Triton pod template (non-root, no written exceptions), without its checkov skips."""
    deployment = next(o for o in kubernetes_objects(project.rendered("prod")[1])
                      if o["kind"] in ("Deployment", "Rollout") and o["metadata"]["labels"]["app.kubernetes.io/component"] == "triton")
    template = copy.deepcopy(deployment["spec"]["template"])
    template["metadata"].pop("annotations", None)
    return template


def _violated(obj: dict[str, Any]) -> set[str]:
    return {v.control for v in check_restricted(obj)}


@pytest.mark.parametrize("kind", KINDS)
def test_the_real_pod_passes_in_every_kind(triton_pod, kind):
    obj = _wrap(kind, triton_pod)
    assert len(list(pod_templates(obj))) == (2 if kind == "LeaderWorkerSet" else 1)
    assert check_restricted(obj) == []


@pytest.mark.parametrize("name", sorted(INJECTIONS))
def test_each_injected_violation_fails(triton_pod, name):
    control, inject = INJECTIONS[name]
    pod = copy.deepcopy(triton_pod)
    inject(pod)
    assert control in _violated(_wrap("Deployment", pod))


@pytest.mark.parametrize("kind", KINDS)
def test_violations_are_found_in_every_kind(triton_pod, kind):
    pod = copy.deepcopy(triton_pod)
    for name in ("hostPath /etc", "privileged", "runAsUser 0 on the pod", "unsafe sysctl", "hostNetwork"):
        INJECTIONS[name][1](pod)
    assert {"volumeTypes", "privileged", "runAsUser", "sysctls", "hostNetwork"} <= _violated(_wrap(kind, pod))


def test_every_control_is_exercised():
    assert {control for control, _ in INJECTIONS.values()} == set(CONTROLS)


def _with_hostpath_and_root(triton_pod: Pod, annotations: dict[str, str], on_template: bool) -> dict[str, Any]:
    pod = copy.deepcopy(triton_pod)
    INJECTIONS["hostPath /etc"][1](pod)
    INJECTIONS["runAsNonRoot unset"][1](pod)
    obj = _wrap("Deployment", pod)
    target = pod["metadata"] if on_template else obj["metadata"]
    target.setdefault("annotations", {}).update(annotations)
    return obj


@pytest.mark.parametrize("on_template", [True, False])
def test_written_reasoned_exceptions_pass(triton_pod, on_template):
    obj = _with_hostpath_and_root(triton_pod, {
        "pod-security.modelfleet.io/volumeTypes": "the agent reads /etc/os-release",
        "checkov.io/skip1": "CKV_K8S_23=the image has no non-root user"}, on_template)
    assert check_restricted(obj) == []


@pytest.mark.parametrize("annotations", [
    {"pod-security.modelfleet.io/volumeTypes": " ", "checkov.io/skip1": "CKV_K8S_23="},  # no reasons
    {"pod-security.modelfleet.io/hostNetwork": "unrelated", "checkov.io/skip1": "CKV_K8S_40=unrelated"},  # other controls
    {"hostPath": "mentioned in some other annotation", "description": "runs as root"},  # not exceptions
])
def test_missing_unreasoned_or_unrelated_exceptions_do_not_pass(triton_pod, annotations):
    obj = _with_hostpath_and_root(triton_pod, annotations, on_template=True)
    assert _violated(obj) == {"volumeTypes", "runAsNonRoot"}
