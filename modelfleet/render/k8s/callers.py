"""Requests counted per caller at each Triton server, without a service mesh (a stack's ``modelfleet:callers``).

Every request the generated client sends names its caller in the ``x-modelfleet-caller`` header. Triton
records no header in its metrics (2.51 can forward headers to a backend as request parameters, never to
/metrics), so each Triton pod of a fleet that declares callers gets a small HAProxy beside it. Its Service
sends the HTTP and gRPC ports to the proxy, which passes every request to Triton over the pod's loopback
through a backend named after the caller (``http.checkout-service``, ``grpc.checkout-service``; a request
naming no declared caller, or none, through ``http.other`` / ``grpc.other``), and HAProxy's own Prometheus
exporter counts each backend's requests and responses. So the counts need no code of ours in the request
path, no Lua, and nothing beside the pod: one process, one configuration file in a ConfigMap.

Cardinality is bounded by the declaration (at most spec.environment.MAX_CALLERS callers, plus ``other``): the
exporter is scraped for backends only, and the ServiceMonitor keeps the two request counters and turns the
backend's name into ``protocol`` and ``caller`` labels. Probes still reach Triton's own port; a client that
bypasses the Service (a pod IP) is not counted. docs/operations/observability.md "Callers" says why not a mesh
or an Envoy sidecar.
"""

from __future__ import annotations

import hashlib
from typing import Any

from ...plan.capacity.pod_resources import CALLER_PROXY_CONNECTIONS
from ...plan.types import FleetPlan, PodPlan, TritonServerPlan
from ...spec.engine_versions import HAPROXY_IMAGE
from ...spec.environment import OTHER_CALLER
from ..client import CALLER_HEADER
from . import common as c

IMAGE = HAPROXY_IMAGE
CONFIG_DIGEST = "modelfleet.io/callers-sha256"
CALLER_HTTP_PORT = 8080
CALLER_GRPC_PORT = 8081
CALLER_METRICS_PORT = 8404
CONFIG_DIR = "/usr/local/etc/haproxy"  # where the official image looks for haproxy.cfg
CONFIG_FILE = "haproxy.cfg"
# The Service's port names, and the proxy's ports they are sent to once callers are counted.
PROXIED = {"http": "caller-http", "grpc": "caller-grpc"}
METRICS_PORT_NAME = "caller-metrics"
COUNTERS = ("haproxy_backend_http_requests_total", "haproxy_backend_http_responses_total")
# How long a request or a stream may stay silent on either side: Triton's own queue timeouts and the clients'
# deadlines end requests long before; a decoupled model's stream may idle between responses.
IDLE_TIMEOUT_S = 3600
H2_WINDOW_BYTES = 1024 * 1024


def proxy_config(callers: tuple[str, ...], *, triton_http: int, triton_grpc: int, http: int = CALLER_HTTP_PORT,
                 grpc: int = CALLER_GRPC_PORT, metrics: int = CALLER_METRICS_PORT, bind: str = "",
                 hard_stop_s: int = 30) -> str:
    """HAProxy's configuration: each protocol's frontend picks the caller's backend by the header (lowercased:
    declared callers are lowercase), every backend the same Triton port on the loopback. ``bind``: the
    address to listen on ("" = every one); ``hard_stop_s``: how long a stopping proxy lets requests finish
    (SIGUSR1, the official image's stop signal, stops accepting and waits for them)."""
    names = (*callers, OTHER_CALLER)
    lines = ["# modelfleet: every request counted per caller (x-modelfleet-caller), then passed to Triton",
             "global", f"  maxconn {CALLER_PROXY_CONNECTIONS}", f"  hard-stop-after {hard_stop_s}s",
             # a gRPC stream's window: HAProxy's 64 KiB default would pace a large tensor by round trips
             f"  tune.h2.initial-window-size {H2_WINDOW_BYTES}",
             "defaults", "  mode http", "  timeout connect 2s", f"  timeout client {IDLE_TIMEOUT_S}s",
             f"  timeout server {IDLE_TIMEOUT_S}s", "  timeout http-request 30s",
             "frontend metrics", f"  bind {bind}:{metrics}", "  http-request use-service prometheus-exporter if { path /metrics }"]
    for protocol, port, h2 in (("http", http, ""), ("grpc", grpc, " proto h2")):
        lines += [f"frontend {protocol}", f"  bind {bind}:{port}{h2}",
                  f"  http-request set-var(txn.caller) req.hdr({CALLER_HEADER}),lower"]
        lines += [f"  use_backend {protocol}.{name} if {{ var(txn.caller) -m str {name} }}" for name in callers]
        lines.append(f"  default_backend {protocol}.{OTHER_CALLER}")
    for name in names:
        lines += [f"backend http.{name}", f"  server triton 127.0.0.1:{triton_http}",
                  f"backend grpc.{name}", f"  server triton 127.0.0.1:{triton_grpc} proto h2"]
    return "\n".join(lines) + "\n"


def config_name(server: TritonServerPlan) -> str:
    return f"{server.kube_name}-callers"


def config_map(server: TritonServerPlan, plan: FleetPlan, text: str) -> dict[str, Any]:
    """The proxy's configuration (``proxy_config``'s ``text``), which its pods mount."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": c.metadata(config_name(server), plan, "callers"),
            "data": {CONFIG_FILE: text}}


def config_digest(text: str) -> str:
    """The pod template's annotation of the configuration: HAProxy reads it at start only, so a change (a caller
    added) must roll the pods, as a changed template does."""
    return hashlib.sha256(text.encode()).hexdigest()


def container(server: TritonServerPlan, pod: PodPlan, image: str = IMAGE) -> dict[str, Any]:
    """The proxy (``image``: the stack's deploy.callerProxyImage): it keeps serving through the pre-stop pause
    as Triton does, then drains on SIGUSR1."""
    return {
        "name": "callers", "image": image, "imagePullPolicy": "IfNotPresent",
        "command": ["haproxy", "-db", "-f", f"{CONFIG_DIR}/{CONFIG_FILE}"],
        "ports": [{"name": PROXIED["http"], "containerPort": CALLER_HTTP_PORT},
                  {"name": PROXIED["grpc"], "containerPort": CALLER_GRPC_PORT},
                  {"name": METRICS_PORT_NAME, "containerPort": CALLER_METRICS_PORT}],
        "resources": c.resources(pod.container("callers")),
        # the pod is ready when Triton is (its own probes); these only say the proxy accepts connections
        "readinessProbe": {"tcpSocket": {"port": PROXIED["http"]}, **c.READINESS},
        "livenessProbe": c.liveness({"tcpSocket": {"port": METRICS_PORT_NAME}}),
        "lifecycle": c.pre_stop(),
        "securityContext": c.container_security(read_only_root=True, non_root=True),
        "volumeMounts": [{"name": "callers", "mountPath": CONFIG_DIR, "readOnly": True}],
    }


def volume(server: TritonServerPlan) -> dict[str, Any]:
    return {"name": "callers", "configMap": {"name": config_name(server)}}


def monitor_endpoint() -> dict[str, Any]:
    """The ServiceMonitor's scrape of the proxy: backends only, the two counters, the backend's name as labels."""
    return {"port": METRICS_PORT_NAME, "path": "/metrics", "params": {"scope": ["backend"]}, "interval": "15s",
            "metricRelabelings": [
                {"sourceLabels": ["__name__"], "regex": "|".join(COUNTERS), "action": "keep"},
                {"sourceLabels": ["proxy"], "regex": r"(http|grpc)\.(.+)", "targetLabel": "protocol",
                 "replacement": "$1", "action": "replace"},
                {"sourceLabels": ["proxy"], "regex": r"(http|grpc)\.(.+)", "targetLabel": "caller",
                 "replacement": "$2", "action": "replace"},
                {"regex": "proxy", "action": "labeldrop"}]}


def hard_stop_s(exit_timeout_s: int) -> int:
    """The proxy outlives Triton's drain (``--exit-timeout-secs``) by a little, so no answer is cut off."""
    return exit_timeout_s + 5
