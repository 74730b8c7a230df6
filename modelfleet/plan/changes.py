"""What a change between two plans of one stack rolls: which workloads get a new pod template.

A workload's pods are a function of its plan (a Triton server with its models, a vLLM model): when that
changes, its pod template changes and Kubernetes (or Argo Rollouts, for a canary) replaces its pods. A
version bump changes one model's plan, so it rolls that model's workload and nothing else; the plan, the
cost diff and the preview say so.
"""

from __future__ import annotations

from .types import FleetPlan, RolloutPlan, TritonModelPlan, VllmModelPlan

# Figures that describe or price a workload but are not in its pods: replica counts are the HPA's, not the
# template's.
NOT_IN_PODS = {"replicas", "min_replicas", "max_replicas", "decision", "decisions", "rollout", "former_names"}


def _workload_state(plan: FleetPlan, name: str) -> dict | None:
    server = next((s for s in plan.triton_servers if s.name == name), None)
    if server is not None:
        members = [plan.model(m).model_dump(exclude=NOT_IN_PODS) for m in server.models]
        return {"server": server.model_dump(exclude=NOT_IN_PODS), "models": members}
    model = next((m for m in plan.models if m.name == name and isinstance(m, VllmModelPlan)), None)
    return None if model is None else model.model_dump(exclude=NOT_IN_PODS)


def workloads(plan: FleetPlan) -> list[str]:
    served = {s.models[0] for s in plan.triton_servers if len(s.models) == 1}
    return sorted([s.name for s in plan.triton_servers] +
                  [m.name for m in plan.models if isinstance(m, VllmModelPlan) and m.name not in served])


def rolling_workloads(before: FleetPlan, after: FleetPlan) -> list[str]:
    """Workloads on both sides whose pods change."""
    common = sorted(set(workloads(before)) & set(workloads(after)))
    return [name for name in common if _workload_state(before, name) != _workload_state(after, name)]


def workload_of(plan: FleetPlan, model: TritonModelPlan | VllmModelPlan) -> tuple[str, RolloutPlan | None]:
    if isinstance(model, TritonModelPlan):
        server = plan.server(model.server)
        return server.name, server.rollout
    return model.name, model.rollout


def version_of(model: TritonModelPlan | VllmModelPlan) -> str:
    if isinstance(model, VllmModelPlan):
        return f"revision {model.revision}" if model.revision else "revision unpinned"
    if model.versions is None:
        return "version unpinned"
    label = "version" if len(model.versions) == 1 else "versions"
    return f"{label} {', '.join(map(str, model.versions))}" + (
        f" (sha256 {model.version_sha256[:12]})" if model.version_sha256 else "")


def how_it_rolls(rollout: RolloutPlan | None) -> str:
    if rollout is None or rollout.strategy == "rolling":
        return "a rolling update"
    steps = " -> ".join(f"{w}%" for w in rollout.steps)
    return f"a canary {steps}, {rollout.pause_s // 60} min each, gated by its SLA analysis"


def version_change(name: str, before: FleetPlan, after: FleetPlan) -> str | None:
    """``fraud-scorer: version 1 -> 2, rolls triton-g5-xlarge alone (a canary 10% -> 100%, ...)``, or None."""
    m0, m1 = before.model(name), after.model(name)
    v0, v1 = version_of(m0), version_of(m1)
    if v0 == v1:
        return None
    workload, rollout = workload_of(after, m1)
    rolling = rolling_workloads(before, after)
    others = [w for w in rolling if w != workload]
    scope = "alone" if not others else f"(with {', '.join(others)}, changed too)"
    return f"{name}: {v0.split(' ', 1)[0]} {v0.split(' ', 1)[1]} -> {v1.split(' ', 1)[1]}, rolls {workload} {scope} as " \
           f"{how_it_rolls(rollout)}"
