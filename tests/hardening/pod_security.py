"""The Pod Security Standards "restricted" profile, checked on rendered objects (what checkov does not cover).

Written from https://kubernetes.io/docs/concepts/security/pod-security-standards/ (the restricted profile
includes every baseline control): each control below names the fields it reads and what it allows. Pods are
found in every kind that holds one: Pod, PodTemplate, Deployment, ReplicaSet, DaemonSet, StatefulSet, Job,
CronJob, and LeaderWorkerSet (leader and worker templates).

Exceptions are written into the manifest, never into this file: an annotation on the object or on its pod
template, with a non-empty reason, either

- ``pod-security.modelfleet.io/<control>: <reason>`` for any control, or
- ``checkov.io/skipN: <CHECK>=<reason>`` for the checkov check that judges the same control
  (``CHECKOV_EQUIVALENT``), so one written exception serves both judges.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

EXCEPTION_PREFIX = "pod-security.modelfleet.io/"
RESTRICTED_VOLUMES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim",
                                "projected", "secret"})
SAFE_SYSCTLS = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
                          "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
                          "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
                          "net.ipv4.tcp_keepalive_probes"})
SELINUX_TYPES = frozenset({"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"})
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")
CHECKOV_EQUIVALENT = {"hostNetwork": "CKV_K8S_19", "hostPID": "CKV_K8S_17", "hostIPC": "CKV_K8S_18",
                      "privileged": "CKV_K8S_16", "hostPorts": "CKV_K8S_26", "allowPrivilegeEscalation": "CKV_K8S_20",
                      "runAsNonRoot": "CKV_K8S_23", "runAsUser": "CKV_K8S_23", "seccompProfile": "CKV_K8S_31"}
CONTROLS = ("hostProcess", "hostNetwork", "hostPID", "hostIPC", "privileged", "capabilities", "volumeTypes",
            "hostPorts", "appArmor", "seLinux", "procMount", "sysctls", "allowPrivilegeEscalation", "runAsNonRoot",
            "runAsUser", "seccompProfile")


@dataclass(frozen=True)
class Violation:
    workload: str  # Kind/namespace/name
    pod: str  # which template: "template", "leaderTemplate", ...
    control: str
    detail: str

    def __str__(self) -> str:
        return f"{self.workload} ({self.pod}): {self.control}: {self.detail}"


def pod_templates(obj: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(where, {"metadata", "spec"}) for every pod an object creates."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind == "Pod":
        yield "pod", {"metadata": obj.get("metadata") or {}, "spec": spec}
    elif kind == "PodTemplate":
        yield "template", obj.get("template") or {}
    elif kind == "CronJob":
        yield "jobTemplate", ((spec.get("jobTemplate") or {}).get("spec") or {}).get("template") or {}
    elif kind == "LeaderWorkerSet":
        lws = spec.get("leaderWorkerTemplate") or {}
        for where in ("leaderTemplate", "workerTemplate"):
            if where in lws:
                yield where, lws[where]
    elif "template" in spec:
        yield "template", spec["template"]


def written_exceptions(*annotation_maps: dict[str, str]) -> set[str]:
    """The controls that carry a written, reasoned exception in any of these annotation maps."""
    skipped_checks = {}
    excepted = set()
    for annotations in annotation_maps:
        for key, value in (annotations or {}).items():
            if key.startswith(EXCEPTION_PREFIX) and str(value).strip():
                excepted.add(key.removeprefix(EXCEPTION_PREFIX))
            elif re.fullmatch(r"checkov\.io/skip\d+", key):
                check, _, reason = str(value).partition("=")
                if reason.strip():
                    skipped_checks[check.strip()] = reason
    return excepted | {control for control, check in CHECKOV_EQUIVALENT.items() if check in skipped_checks}


def check_restricted(obj: dict[str, Any]) -> list[Violation]:
    """Every restricted-profile violation in ``obj``'s pods that no written exception covers."""
    meta = obj.get("metadata") or {}
    workload = f"{obj.get('kind')}/{meta.get('namespace', '')}/{meta.get('name', '')}"
    found = []
    for where, template in pod_templates(obj):
        excepted = written_exceptions(meta.get("annotations") or {}, (template.get("metadata") or {}).get("annotations") or {})
        for control, detail in pod_violations(template.get("metadata") or {}, template.get("spec") or {}):
            if control not in excepted:
                found.append(Violation(workload, where, control, detail))
    return found


def pod_violations(meta: dict[str, Any], pod: dict[str, Any]) -> list[tuple[str, str]]:
    pod_context = pod.get("securityContext") or {}
    containers = [c for key in CONTAINER_LISTS for c in pod.get(key) or []]
    found = _host_and_volumes(pod) + _pod_context(pod_context) + _app_armor(meta)
    for container in containers:
        found += [(control, f"container {container.get('name')}: {detail}")
                  for control, detail in _container(container, pod_context)]
    return found


def _host_and_volumes(pod: dict[str, Any]) -> list[tuple[str, str]]:
    found = [(key, f"{key}: true") for key in ("hostNetwork", "hostPID", "hostIPC") if pod.get(key)]
    for volume in pod.get("volumes") or []:
        kinds = [k for k in volume if k != "name"]
        if not kinds or any(k not in RESTRICTED_VOLUMES for k in kinds):
            found.append(("volumeTypes", f"volume {volume.get('name')}: {', '.join(kinds) or 'no source'}"))
    return found


def _pod_context(context: dict[str, Any]) -> list[tuple[str, str]]:
    found = _common_context(context)
    found += [("sysctls", f"unsafe sysctl {s.get('name')}") for s in context.get("sysctls") or []
              if s.get("name") not in SAFE_SYSCTLS]
    return found


def _common_context(context: dict[str, Any]) -> list[tuple[str, str]]:
    """Fields a pod-level and a container-level securityContext share."""
    found = []
    if (context.get("windowsOptions") or {}).get("hostProcess"):
        found.append(("hostProcess", "windowsOptions.hostProcess: true"))
    selinux = context.get("seLinuxOptions") or {}
    if selinux.get("type", "") not in SELINUX_TYPES or selinux.get("user") or selinux.get("role"):
        found.append(("seLinux", f"seLinuxOptions {selinux}"))
    if context.get("runAsUser") == 0:
        found.append(("runAsUser", "runAsUser: 0"))
    armor = (context.get("appArmorProfile") or {}).get("type")
    if armor not in (None, "RuntimeDefault", "Localhost"):
        found.append(("appArmor", f"appArmorProfile.type {armor}"))
    if (context.get("seccompProfile") or {}).get("type") == "Unconfined":
        found.append(("seccompProfile", "seccompProfile.type Unconfined"))
    return found


def _container(container: dict[str, Any], pod_context: dict[str, Any]) -> list[tuple[str, str]]:
    context = container.get("securityContext") or {}
    found = _common_context(context)
    if context.get("privileged"):
        found.append(("privileged", "privileged: true"))
    if context.get("allowPrivilegeEscalation") is not False:
        found.append(("allowPrivilegeEscalation", "allowPrivilegeEscalation is not false"))
    if context.get("procMount", "Default") != "Default":
        found.append(("procMount", f"procMount {context['procMount']}"))
    found += [("hostPorts", f"hostPort {p['hostPort']}") for p in container.get("ports") or [] if p.get("hostPort")]
    capabilities = context.get("capabilities") or {}
    if "ALL" not in (capabilities.get("drop") or []):
        found.append(("capabilities", "capabilities.drop does not include ALL"))
    if set(capabilities.get("add") or []) - {"NET_BIND_SERVICE"}:
        found.append(("capabilities", f"capabilities.add {capabilities['add']}"))
    non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot"))
    if non_root is not True:
        found.append(("runAsNonRoot", "runAsNonRoot is not true (pod or container)"))
    if (context.get("seccompProfile") or pod_context.get("seccompProfile") or {}).get("type") not in ("RuntimeDefault", "Localhost"):
        found.append(("seccompProfile", "seccompProfile is neither RuntimeDefault nor Localhost (pod or container)"))
    return found


def _app_armor(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """The annotation form of AppArmor (before the appArmorProfile field)."""
    prefix = "container.apparmor.security.beta.kubernetes.io/"
    return [("appArmor", f"{key}: {value}") for key, value in (meta.get("annotations") or {}).items()
            if key.startswith(prefix) and not (value == "runtime/default" or str(value).startswith("localhost/"))]
