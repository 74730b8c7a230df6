"""IAM as the Pulumi program registers it (run under mocks, for every stack): every inline RolePolicy passes
parliament with no findings, trust policies admit one service only, and the node role has exactly the
three worker policies, found by the ``role`` each attachment names (not by resource names)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from modelfleet.render.k8s import vllm_models
from tests.conftest import STACKS
from tests.hardening.judges import require_module

pytestmark = pytest.mark.judge

ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
WORKER_POLICIES = {"arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy", "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
                   "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly"}
TRUSTED_SERVICES = {"ec2.amazonaws.com", "eks.amazonaws.com", "pods.eks.amazonaws.com"}


def role_name(resource_name: str) -> str:
    """The physical name AWS gives an auto-named role: the resource name and a random suffix."""
    return f"{resource_name}-0a1b2c3"


@pytest.fixture(scope="module")
def registered() -> Iterator[dict[str, Any]]:
    """Each stack's program under the preview mocks, except that a role gets its auto-name (the mocks leave
    ``name`` unknown, as a preview does), so an attachment's ``role`` input says which role it is on."""
    require_module("pulumi")
    from modelfleet.preview import runner as preview_runner
    from tests.components.mocked import run

    class NamedRoles(preview_runner.FleetMocks):
        def new_resource(self, args):
            resource_id, state = super().new_resource(args)
            if args.typ == ROLE:
                state.setdefault("name", role_name(args.name))
            return resource_id, state

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(preview_runner, "FleetMocks", NamedRoles)
        yield {stack: run(stack) for stack in STACKS}


def of_type(result, token: str) -> dict[str, Any]:
    return {r.name: r for r in result.resources if r.type == token}


@pytest.mark.parametrize("stack", STACKS)
def test_every_registered_role_policy_passes_parliament(registered, plans, stack):
    parliament = require_module("parliament")
    policies = of_type(registered[stack], ROLE_POLICY)
    plan = plans[stack]
    streamed = [m for m in vllm_models(plan) if m.weights.source != "hub"]
    expected = {f"{s.name}-read" for s in plan.triton_servers} | {f"{m.name}-read" for m in streamed} | {
        f"{m.name}-stage-write" for m in streamed if m.weights.source == "staged"}  # the staging Job's
    assert set(policies) == expected and expected
    for name, policy in policies.items():
        document = policy.inputs["policy"]
        findings = parliament.analyze_policy_string(document, include_community_auditors=True).findings
        assert findings == [], (name, [f"{f.issue}: {f.detail}" for f in findings])
        owner = name.removesuffix("-read").removesuffix("-write")
        assert policy.inputs["role"] == f"{owner}-pod-id", "granted to the workload's (or its Job's) own role"


def test_the_vllm_s3_read_policy_is_linted(registered, plans):
    """The prod example streams one LLM from S3: its read policy is among those parliament judged."""
    s3_llms = [m.name for m in vllm_models(plans["prod"]) if m.artifact.startswith("s3://")]
    assert s3_llms and {f"{n}-read" for n in s3_llms} <= set(of_type(registered["prod"], ROLE_POLICY))


@pytest.mark.parametrize("stack", STACKS)
def test_trust_policies_admit_one_service_to_assume_the_role(registered, stack):
    """Parliament lints identity policies; a trust policy (a Principal, no Resource) is checked here."""
    roles = of_type(registered[stack], ROLE)
    assert roles
    for name, role in roles.items():
        (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        assert statement["Effect"] == "Allow" and set(statement["Principal"]) == {"Service"}, name
        assert statement["Principal"]["Service"] in TRUSTED_SERVICES, name
        assert set(actions) <= {"sts:AssumeRole", "sts:TagSession"} and "Condition" not in statement, name


@pytest.mark.parametrize("stack", STACKS)
def test_node_role_has_exactly_the_three_worker_policies(registered, stack):
    result = registered[stack]
    roles = of_type(result, ROLE)
    (node_role,) = [n for n, r in roles.items()
                    if json.loads(r.inputs["assumeRolePolicy"])["Statement"][0]["Principal"]["Service"] == "ec2.amazonaws.com"]
    attachments = of_type(result, ATTACHMENT).values()
    on_node_role = [a.inputs["policyArn"] for a in attachments if a.inputs["role"] == role_name(node_role)]
    assert sorted(on_node_role) == sorted(WORKER_POLICIES)
    assert all(a.inputs["role"] in {role_name(n) for n in roles} for a in attachments), "every attachment names a role"
    assert not [p for p in of_type(result, ROLE_POLICY).values() if p.inputs["role"] in (role_name(node_role), f"{node_role}-id")]
    node_groups = [r for r in result.resources if r.type == "aws:eks/nodeGroup:NodeGroup"]
    assert node_groups and all(g.inputs.get("nodeRoleArn", "").endswith(f":{node_role}") for g in node_groups)
