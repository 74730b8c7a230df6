"""The cluster as ``modelfleet doctor`` reads it: kubectl, with the caller's own credentials (an edge adapter;
deploy/prerequisites.py decides what to look for and never touches a cluster)."""

from __future__ import annotations

import json
import shutil
import subprocess

from ..deploy.prerequisites import Probe

TIMEOUT_S = 30


def _kubectl(context: str | None, *args: str) -> subprocess.CompletedProcess:
    command = ["kubectl", *(["--context", context] if context else []), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, check=False)


def cluster_access(context: str | None) -> str | None:
    """None when the cluster answers; else why not, in one line."""
    if shutil.which("kubectl") is None:
        return "no kubectl on PATH"
    try:
        result = _kubectl(context, "get", "--raw", "/version", "--request-timeout=10s")
    except subprocess.TimeoutExpired:
        return "the cluster did not answer in time"
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["no credentials"])[-1]
        return f"no access to the cluster ({reason})"
    return None


class KubectlReader:
    def __init__(self, context: str | None) -> None:
        self.context = context

    def exists(self, probe: Probe) -> bool:
        if probe.kind in ("crd", "apiservice"):
            kind = "crd" if probe.kind == "crd" else "apiservice"
            return _kubectl(self.context, "get", kind, probe.name, "-o", "name").returncode == 0
        if probe.kind == "gateway":
            return _kubectl(self.context, "get", "gateways.gateway.networking.k8s.io", probe.name, "-n",
                            probe.namespace, "-o", "name").returncode == 0
        if probe.kind == "plugin":
            found = _kubectl(self.context, "get", "configmap", "argo-rollouts-config", "-n", probe.namespace,
                             "-o", "jsonpath={.data.trafficRouterPlugins}")
            return found.returncode == 0 and probe.name in found.stdout
        return self._workload(probe)

    def _workload(self, probe: Probe) -> bool:
        where = ["-n", probe.namespace] if probe.namespace else ["--all-namespaces"]
        found = _kubectl(self.context, "get", "deployments,daemonsets", *where, "-o", "json")
        if found.returncode != 0:
            return False
        return any(probe.name in item["metadata"]["name"] for item in json.loads(found.stdout).get("items", []))
