"""A stateful model's sequences stay on one pod: its server's Service keeps each client IP on one replica."""

from __future__ import annotations

import kubernetes_validate

from modelfleet.commands.plan import format_plan
from modelfleet.plan.triton.sequences import session_affinity
from modelfleet.render.k8s.triton import render_triton_manifests


def _server_of(plan, model: str):
    return next(s for s in plan.triton_servers if model in s.models)


def test_the_stateful_models_server_keeps_a_client_ip_on_one_pod_for_its_idle_timeout(plans):
    plan = plans["prod"]
    server = _server_of(plan, "session-recommender")
    assert server.max_replicas > 1  # the reason it matters: 2-3 replicas behind one ClusterIP
    objects = render_triton_manifests(plan, server, "bucket", "aws-cli:2", {})
    (service,) = [o for o in objects if o["kind"] == "Service"]
    # idle_timeout_ms 600000 in models.yaml: the affinity outlives every idle gap a live sequence can have
    assert service["spec"]["sessionAffinity"] == "ClientIP"
    assert service["spec"]["sessionAffinityConfig"] == {"clientIP": {"timeoutSeconds": 600}}
    kubernetes_validate.validate(service, "1.33", strict=True)


def test_servers_without_stateful_models_balance_every_connection(plans):
    plan = plans["prod"]
    for server in plan.triton_servers:
        if not any(getattr(plan.model(n), "sequence", None) for n in server.models):
            assert server.session_affinity is None
            (service,) = [o for o in render_triton_manifests(plan, server, "b", "i", {}) if o["kind"] == "Service"]
            assert "sessionAffinity" not in service["spec"]


def test_the_plan_says_what_the_affinity_needs_and_what_it_cannot_keep(plans):
    text = format_plan(plans["prod"])
    line = next(x for x in text.splitlines() if "sessionAffinity: ClientIP, 600 s" in x)
    for claim in ("all its requests come from one client IP", "max_sequences counts per replica",
                  "session-recommender 64", "Scaling in and every rollout end the live sequences",
                  "text-embedder on the same Service are pinned too"):
        assert claim in line, claim


def test_through_a_gateway_canary_the_plan_says_the_affinity_does_not_hold(plans):
    plan = plans["staging"]
    server = _server_of(plan, "session-recommender")
    routed = server.model_copy(update={"rollout": server.rollout.model_copy(
        update={"strategy": "canary", "traffic": "gateway", "steps": (10, 100)})})
    assert "Gateway" not in session_affinity(server, plan).decision.reason
    assert "through the Gateway the affinity does not hold" in session_affinity(routed, plan).decision.reason
