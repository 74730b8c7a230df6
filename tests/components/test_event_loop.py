"""A preview does not depend on what ran before it in the same process (issue 29: a different test order failed
8 tests and errored 7, because the SDK ran on whatever event loop the previous test had left)."""

from __future__ import annotations

import asyncio

import pytest

from tests.components.mocked import run


async def _nothing() -> None:
    return None


@pytest.mark.parametrize("left_behind", ["asyncio.run", "a closed loop", "no loop"])
def test_a_preview_runs_whatever_event_loop_state_it_finds(left_behind):
    if left_behind == "asyncio.run":
        asyncio.run(_nothing())  # closes its loop and leaves the thread with none
    elif left_behind == "a closed loop":
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.close()
    else:
        asyncio.set_event_loop(None)
    result = run("dev")
    assert any(r.type == "aws:eks/nodeGroup:NodeGroup" for r in result.resources)


def test_a_preview_leaves_the_sdks_stack_walk_as_it_found_it():
    """The runner skips the SDK's per-resource stack walk while the program runs (runner._no_source_positions)
    and puts it back after, also when the program fails; resources still register with their parents."""
    from pulumi.runtime import resource as sdk_resource

    real = sdk_resource._get_stack_trace
    result = run("dev")
    assert sdk_resource._get_stack_trace is real and result.error is None
    assert all(r.parent for r in result.resources if r.type == "aws:eks/nodeGroup:NodeGroup")
    broken = run("dev", token=None, dry_run=False, expect_error=True)  # a real deploy stops without the token
    assert sdk_resource._get_stack_trace is real and broken.error


def test_kubernetes_objects_are_previewed_whole_but_answered_with_their_identity():
    """The preview records every Kubernetes object's whole manifest (what `pulumi up` would apply); the mocks
    answer with its identity only (runner.kubernetes_state: the program reads no output of these objects), and
    an AWS resource still gets its inputs back with an ARN."""
    from pulumi.runtime import MockResourceArgs

    from modelfleet.preview.runner import FleetMocks

    result = run("dev")
    deployments = [r for r in result.resources if r.type == "kubernetes:apps/v1:Deployment"]
    assert deployments and all(r.inputs["spec"]["template"]["spec"]["containers"] for r in deployments)
    mocks = FleetMocks("us-east-1")
    manifest = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "ml"},
                "spec": {"replicas": 2}}
    _, state = mocks.new_resource(MockResourceArgs("kubernetes:apps/v1:Deployment", "x", manifest, custom=True))
    assert state == {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x", "namespace": "ml"}}
    _, state = mocks.new_resource(MockResourceArgs("aws:iam/role:Role", "r", {"name": "r"}, custom=True))
    assert state == {"name": "r", "arn": "arn:aws:iam:us-east-1:123456789012:r"}
