"""The second line of defence (#23): whatever the plan's name check missed, ``render`` and the deploy plan refuse
to set the same object twice and name both producers (plan/names.refuse_twice), never replacing one silently.
The plans here are edited past the check on purpose."""

from __future__ import annotations

import pytest

from modelfleet.deploy import Deployment, compile_deploy_plan
from modelfleet.errors import CompileError
from modelfleet.render.k8s import vllm_models
from modelfleet.render.manifests import render_fleet_manifests
from tests.hardening.adversarial_names import stack_config


@pytest.fixture(scope="module")
def deployment(project) -> Deployment:
    return project.deployment("prod", stack_config("prod"))


def test_render_refuses_a_workload_named_as_another(deployment):
    plan, server = deployment.plan, deployment.plan.triton_servers[0]
    llm = vllm_models(plan)[0]
    models = tuple(m.model_copy(update={"name": server.name}) if m is llm else m for m in plan.models)
    with pytest.raises(CompileError) as caught:
        render_fleet_manifests(plan.model_copy(update={"models": models}), deployment.env.deploy)
    assert f"workload {server.name}" in str(caught.value) and "twice" in str(caught.value)


def test_render_refuses_an_object_two_workloads_create(deployment):
    """A canary LLM's canary Service (with a gateway) and another LLM renamed <canary>-canary: the first line
    refuses this; with the plan edited past it, render must too."""
    plan = deployment.plan
    first = next(m for m in vllm_models(plan) if m.rollout and m.rollout.strategy == "canary")
    second = next(m for m in vllm_models(plan) if m is not first)
    rollout = first.rollout.model_copy(update={"traffic": "gateway"})
    edits = {first.name: {"rollout": rollout}, second.name: {"name": f"{first.name}-canary"}}
    models = tuple(m.model_copy(update=edits.get(m.name, {})) for m in plan.models)
    edited = plan.model_copy(update={"models": models, "gateway_name": "gw", "gateway_namespace": "gw"})
    with pytest.raises(CompileError) as caught:
        render_fleet_manifests(edited, deployment.env.deploy)
    message = str(caught.value)
    assert f"Service modelfleet {first.name}-canary" in message
    assert f"kubernetes/{first.name}.yaml" in message and f"kubernetes/{first.name}-canary.yaml" in message


def test_the_deploy_plan_refuses_an_object_applied_twice(deployment):
    manifests = dict(deployment.manifests)
    first, second = [m.name for m in vllm_models(deployment.plan)][:2]
    manifests[second] = manifests[second] + [manifests[first][-1]]  # the first's last object, in the second's too
    with pytest.raises(CompileError) as caught:
        compile_deploy_plan(deployment._replace(manifests=manifests))
    assert f"workload {first}" in str(caught.value) and f"workload {second}" in str(caught.value)
