"""What waits for what in `pulumi up` (the recorded ``depends_on`` of every resource, followed transitively).

The kubernetes provider retries a missing namespace for about 30 s only, while GPU node groups take many
minutes: every namespaced object must wait for the Namespace, and the Namespace (and anything else that
needs no GPU node) must not wait for a node group.
"""

from __future__ import annotations

from functools import cache

import pytest

from tests.components.mocked import created_cluster, run
from tests.conftest import STACKS

NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
WORKLOADS = ("Deployment", "LeaderWorkerSet", "Rollout")  # a canary workload is a Rollout


def closure(result):
    """URN -> every URN it waits for, directly or through what it waits for (parents' waits included)."""
    by_urn = {r.urn: r for r in result.resources}

    @cache
    def waits(urn: str) -> frozenset[str]:
        resource = by_urn[urn]
        direct = set(resource.depends_on) | ({resource.parent} if resource.parent in by_urn else set())
        return frozenset(direct.union(*(waits(u) for u in direct)))

    return by_urn, waits


def _kubernetes(result):
    return [r for r in result.resources if r.type.startswith("kubernetes:") and "kind" in r.inputs]


@pytest.mark.parametrize("stack", STACKS)
def test_every_namespaced_object_waits_for_the_namespace(runs, plans, stack):
    result = runs[stack]
    by_urn, waits = closure(result)
    namespace = next(r.urn for r in _kubernetes(result) if r.inputs["kind"] == "Namespace")
    namespaced = [r for r in _kubernetes(result) if r.inputs["metadata"].get("namespace") == plans[stack].namespace]
    assert {r.inputs["kind"] for r in namespaced} >= {"Secret", "ServiceAccount", "Deployment", "Service",
                                                      "PodDisruptionBudget", "NetworkPolicy", "ServiceMonitor"}
    for resource in namespaced:
        assert namespace in resource.depends_on, (resource.name, "waits for the Namespace itself")


@pytest.mark.parametrize("stack", STACKS)
def test_nothing_that_needs_no_gpu_node_waits_for_a_node_group(runs, stack):
    """The Namespace, the device plugin, the token Secrets, accounts, budgets, policies and monitors are
    applied while the node groups are still being created."""
    result = runs[stack]
    by_urn, waits = closure(result)
    for resource in _kubernetes(result):
        groups = {by_urn[u].name for u in waits(resource.urn) if by_urn[u].type == NODE_GROUP}
        if resource.inputs["kind"] in WORKLOADS + ("Service", "HorizontalPodAutoscaler"):
            assert groups, resource.name
        else:
            assert groups == set(), (resource.name, groups)


@pytest.mark.parametrize("stack", STACKS)
def test_a_workload_waits_for_its_own_node_group_credentials_and_account_only(runs, plans, stack):
    result, plan = runs[stack], plans[stack]
    by_urn, waits = closure(result)
    for resource in _kubernetes(result):
        if resource.inputs["kind"] not in WORKLOADS:
            continue
        name = resource.inputs["metadata"]["name"]
        planned = next((s for s in plan.triton_servers if s.kube_name == name), None) or plan.model(name)
        direct = {(by_urn[u].type, by_urn[u].name) for u in resource.depends_on}
        groups = {n for t, n in direct if t == NODE_GROUP}  # its plan group: every zone's group of a zonal one
        zonal = plan.node_group(planned.node_group).zonal
        assert groups == ({f"{planned.node_group}-{z.zone}" for z in zonal} if zonal else {planned.node_group})
        assert ("kubernetes:core/v1:ServiceAccount", f"serviceaccount-{plan.namespace}-{name}") in direct
        credentials = {t for t, _ in direct} & {"aws:eks/podIdentityAssociation:PodIdentityAssociation",
                                                "kubernetes:core/v1:Secret"}
        staged = not name.startswith("triton-") and plan.model(name).weights.source == "staged"
        # a staged checkpoint: the read role and the token Secret its Job used (registered under one key)
        assert len(credentials) == (2 if staged else 1), direct
        if name.startswith("triton-"):
            assert "aws:s3/bucketObjectv2:BucketObjectv2" in {t for t, _ in direct}
        assert "kubernetes:apps/v1:DaemonSet" in {t for t, _ in direct}, "GPUs are advertised by the device plugin"


@pytest.mark.parametrize("stack", STACKS)
def test_services_and_autoscalers_wait_for_their_workload(runs, stack):
    result = runs[stack]
    by_urn, _ = closure(result)
    for resource in _kubernetes(result):
        if resource.inputs["kind"] in ("Service", "HorizontalPodAutoscaler"):
            kinds = {by_urn[u].inputs.get("kind") for u in resource.depends_on if by_urn[u].type.startswith("kubernetes:")}
            assert kinds & set(WORKLOADS), resource.name


def test_in_a_created_cluster_crds_and_controllers_come_first():
    """ServiceMonitors wait for the Prometheus operator's release (its CRD), the LeaderWorkerSet for the LWS
    controller's, HPAs for the adapter's, the releases for the system nodes, and pods with roles for the
    Pod Identity agent."""
    result = run("prod", config=created_cluster("prod"))
    by_urn, waits = closure(result)
    releases = {r.name: r.urn for r in result.resources if r.type == "kubernetes:helm.sh/v3:Release"}
    expected = {"ServiceMonitor": "kube-prometheus-stack", "LeaderWorkerSet": "lws",
                "HorizontalPodAutoscaler": "prometheus-adapter"}
    for resource in _kubernetes(result):
        if resource.inputs["kind"] in expected:
            assert releases[expected[resource.inputs["kind"]]] in resource.depends_on, resource.name
    system = next(r.urn for r in result.resources if r.type == NODE_GROUP and r.name == "system")
    assert all(system in waits(urn) for urn in releases.values())
    agent = next(r.urn for r in result.resources if r.name == "cluster-pod-identity-agent")
    roles = [r for r in _kubernetes(result) if r.inputs["kind"] == "Deployment" and r.name.startswith("deployment-")
             and any(by_urn[u].type.endswith("PodIdentityAssociation") for u in r.depends_on)]
    assert roles and all(agent in r.depends_on for r in roles)


@pytest.mark.parametrize("stack", STACKS)
def test_a_staged_checkpoint_is_copied_before_its_workload_starts(runs, plans, stack):
    """Pulumi waits for the staging Job to complete before it applies the workload that streams its copy; the
    Job waits for its account, program, token, write role and the bucket (#12)."""
    result, plan = runs[stack], plans[stack]
    by_urn, waits = closure(result)
    jobs = {r.inputs["metadata"]["name"]: r for r in _kubernetes(result) if r.inputs["kind"] == "Job"}
    staged = [m for m in plan.models if getattr(m, "weights", None) and m.weights.source == "staged"]
    assert staged and len(jobs) == len(staged)
    for model in staged:
        job = next(j for name, j in jobs.items() if name.startswith(f"{model.name}-stage-"))
        workload = next(r for r in _kubernetes(result) if r.inputs["kind"] in WORKLOADS
                        and r.inputs["metadata"]["name"] == model.name)
        assert job.urn in workload.depends_on
        direct = {(by_urn[u].type, by_urn[u].name) for u in job.depends_on}
        assert ("kubernetes:core/v1:ServiceAccount", f"serviceaccount-{plan.namespace}-{model.name}-stage") in direct
        assert ("kubernetes:core/v1:ConfigMap", f"configmap-{plan.namespace}-{model.name}-stage-program") in direct
        assert ("aws:eks/podIdentityAssociation:PodIdentityAssociation", f"{model.name}-stage-identity") in direct
        assert "kubernetes:core/v1:Secret" in {t for t, _ in direct}
        assert "aws:s3/bucket:Bucket" in {by_urn[u].type for u in waits(job.urn)}
        groups = {by_urn[u].name for u in waits(job.urn) if by_urn[u].type == NODE_GROUP}
        assert groups == set(), "the Job runs off the fleet's GPU nodes and waits for none of them"
