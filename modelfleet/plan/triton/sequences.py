"""Stateful models (``stateful:``) on Triton's sequence batcher: slots, instances, idle release.

The sequence batcher routes every request of a sequence (one CORRID) to the same slot and tells the model
where a sequence starts, ends and which batch rows are live (the START, END, READY and CORRID control
inputs). A sequence with no request for ``idle_timeout_ms`` is released: its slot is freed and its next
request must carry START again (proven on the real server, tests/engines/test_triton_features.py).

    direct   one slot per batch row of each instance: slots = max(max_batch_size, 1) x instances, so the
             compiler raises the instance count until the slots hold ``max_sequences`` (a sequence beyond
             them waits, unanswered, for a slot to be released)
    oldest   ``max_candidate_sequences`` = ``max_sequences``; each batch takes the next step of the oldest
             waiting sequences, on any instance

The sequence batcher has no queue policy (no timeout, no REJECT: model_config.proto's ModelSequenceBatching
has none), so the p99 is met by sizing instead: the slots hold every live sequence, and the batching
window plus two executions fit in the p99 (the same derivation as a dynamic-batched model, without the
timeout that enforces it there).

Routing: the slots, and the state a direct-strategy model keeps in memory, live in ONE pod; Triton has no
routing between replicas, and a request's sequence id is in its body (an HTTP JSON parameter, a gRPC field),
where kube-proxy cannot see it. So a server of stateful models gets ``sessionAffinity: ClientIP`` on its
Service: kube-proxy sends every new connection from a client IP to the pod that IP was last sent to, for
``timeoutSeconds`` after that IP's last new connection (Kubernetes allows 1 to 86,400 s, as idle_timeout_ms
does). With the timeout at the longest idle release, a sequence's requests reach its pod as long as it is
alive, provided they all come from one client IP. A Gateway routes to the pods' endpoints itself, past the
Service's affinity, and a canary's HTTPRoute splits requests by weight: the plan says so where one exists.
"""

from __future__ import annotations

import math

from ...spec.models import ClassicModelSpec
from ..types import Decision, FleetPlan, SequencePlan, SessionAffinityPlan, TritonModelPlan, TritonServerPlan

MAX_INSTANCES = 16  # ClassicOverridesSpec.instance_count's bound: more slots need more GPUs, not instances


def sequence_instances(model: ClassicModelSpec, batch: int) -> int:
    """Instances a model runs: its override, raised (direct strategy) until the slots hold max_sequences."""
    count = model.overrides.instance_count or 1
    if model.stateful is None or model.stateful.strategy != "direct":
        return count
    return max(count, min(MAX_INSTANCES, math.ceil(model.stateful.max_sequences / max(batch, 1))))


def sequence_plan(model: ClassicModelSpec, batch: int, instances: int, window_us: int) -> SequencePlan | None:
    stateful = model.stateful
    if stateful is None:
        return None
    slots = max(batch, 1) * instances if stateful.strategy == "direct" else stateful.max_sequences
    return SequencePlan(strategy=stateful.strategy, idle_timeout_us=stateful.idle_timeout_ms * 1000,
                        max_sequences=stateful.max_sequences, slots=slots, max_queue_delay_us=window_us)


def sequence_decision(model: ClassicModelSpec, plan: SequencePlan, batch: int, compute_ms: float) -> Decision:
    if plan.strategy == "direct":
        how = (f"{plan.slots} slots = batch {max(batch, 1)} x {plan.slots // max(batch, 1)} instance(s), for "
               f"{plan.max_sequences} live sequences" + ("" if plan.slots >= plan.max_sequences else
                                                          f" (capped at {MAX_INSTANCES} instances: the rest wait)"))
    else:
        how = f"the {plan.max_sequences} oldest waiting sequences are batched together, on any instance"
    worst = plan.max_queue_delay_us / 1000 + 2 * compute_ms
    return Decision(choice=f"sequence batcher ({plan.strategy}), idle release after {plan.idle_timeout_us} us",
                    reason=f"{how}; no queue timeout exists for sequences, so the p99 {model.sla.p99_latency_ms:g} ms "
                           f"holds by sizing: window {plan.max_queue_delay_us / 1000:g} ms + two executions of "
                           f"{compute_ms:g} ms = {worst:g} ms")


def with_session_affinity(plan: FleetPlan) -> FleetPlan:
    """Each server of stateful models with the Service affinity that keeps a client's sequences on one pod."""
    servers = tuple(s.model_copy(update={"session_affinity": session_affinity(s, plan)}) for s in plan.triton_servers)
    return plan.model_copy(update={"triton_servers": servers})


def session_affinity(server: TritonServerPlan, plan: FleetPlan) -> SessionAffinityPlan | None:
    stateful = [m for m in map(plan.model, server.models) if isinstance(m, TritonModelPlan) and m.sequence]
    if not stateful:
        return None
    longest = max(stateful, key=lambda m: (m.sequence.idle_timeout_us if m.sequence else 0, m.name))
    assert longest.sequence is not None
    timeout_s = math.ceil(longest.sequence.idle_timeout_us / 1e6)
    return SessionAffinityPlan(timeout_s=timeout_s, decision=Decision(
        choice=f"sessionAffinity: ClientIP, {timeout_s} s",
        reason=_affinity_reason(server, stateful, longest.name, timeout_s)))


def _affinity_reason(server: TritonServerPlan, stateful: list[TritonModelPlan], longest: str, timeout_s: int) -> str:
    names = ", ".join(m.name for m in stateful)
    slots = ", ".join(f"{m.name} {m.sequence.slots}" for m in stateful if m.sequence)  # per pod
    pinned = [n for n in server.models if n not in {m.name for m in stateful}]
    text = (f"{names} {'keeps' if len(stateful) == 1 else 'keep'} each sequence's state in one pod, and the Service would spread a client's connections "
            f"over the server's pods ({server.min_replicas}-{server.max_replicas} replicas, and a rollout's extra ones); kube-proxy keeps every new connection from "
            f"one client IP on one pod for {timeout_s} s after that IP's last new connection (the longest idle release, "
            f"{longest}'s), so a sequence reaches its pod while it lives, provided all its requests come from one client "
            f"IP (one client pod or connection; not spread over a pool of proxies). max_sequences counts per replica: each "
            f"pod has its own slots ({slots}), and one client IP's sequences all share its pod's. Scaling in and every rollout end the "
            f"live sequences of the pods they remove: their next request lands on another pod without START, which Triton "
            f"refuses: the client must start them again")
    if pinned:
        text += f"; {', '.join(pinned)} on the same Service are pinned too (load spreads by client IP, not by request)"
    if server.rollout.traffic == "gateway":
        text += ("; through the Gateway the affinity does not hold: the Gateway routes to the pods' endpoints itself "
                 "and the canary's HTTPRoute splits requests by weight (Gateway API's sessionPersistence is "
                 "experimental), so a sequence may cross pods there: clients of stateful models call the Service")
    return text
