"""Triton servers are named after their pool or instance type now, not after a member (``triton-g5-xlarge``,
was ``triton-image-preprocessor``). A stack deployed under the old names keeps its resources: every one of
them is carried over by a Pulumi alias, nothing is created beside them, and the rename is the only change.

"Deployed under the old names" is the same program run with the plan the earlier compiler made: each server
under its former name (``TritonServerPlan.former_names``: ``triton-<anchor>``, as packing.py named it).
"""

from __future__ import annotations

import json

import pytest

from modelfleet.cost import policy
from modelfleet.plan.types import FleetPlan, TritonModelPlan
from modelfleet.preview.runner import PreviewResult, Recorded
from modelfleet.render.k8s.triton import REPOSITORY_DIGEST
from tests.components.mocked import run
from tests.conftest import STACKS


def as_named_before(plan: FleetPlan) -> FleetPlan:
    """The plan with every renamed server under its former name, as the earlier compiler named it."""
    former = {s.name: s.former_names[0] for s in plan.triton_servers if s.former_names}
    servers = tuple(s.model_copy(update={"name": former.get(s.name, s.name), "former_names": ()})
                    for s in plan.triton_servers)
    models = tuple(m.model_copy(update={"server": former.get(m.server, m.server)}) if isinstance(m, TritonModelPlan)
                   else m for m in plan.models)
    groups = tuple(g.model_copy(update={"workloads": tuple(sorted(former.get(w, w) for w in g.workloads))})
                   for g in plan.node_groups)
    pipelines = tuple(p.model_copy(update={"server": former.get(p.server, p.server)}) for p in plan.pipelines)
    return plan.model_copy(update={"triton_servers": tuple(sorted(servers, key=lambda s: s.name)), "models": models,
                                   "node_groups": groups, "pipelines": pipelines})


@pytest.fixture(scope="module")
def deployed_before(request):
    """Each stack as the earlier compiler deployed it (the program run with its plan), and the renames."""
    compile_fleet = policy.compile_fleet
    renames: dict[str, dict[str, str]] = {}

    def earlier(fleet, env, catalogue):
        plan = compile_fleet(fleet, env, catalogue)
        renames[env.name] = {s.former_names[0]: s.name for s in plan.triton_servers if s.former_names}
        return as_named_before(plan)

    patch = pytest.MonkeyPatch()
    patch.setattr(policy, "compile_fleet", earlier)
    try:
        return {stack: run(stack) for stack in STACKS}, renames
    finally:
        patch.undo()


def alias_urns(resource: Recorded) -> set[str]:
    """The URNs a resource's aliases name (same type and parent, another name)."""
    chain = resource.urn.rsplit("::", 1)[0]
    return {f"{chain}::{a['name']}" for a in resource.aliases if "name" in a and set(a) <= {"name", "parentUrn"}
            and not a.get("parentUrn")}


def renamed(inputs: dict, renames: dict[str, str]) -> dict:
    text = json.dumps(inputs, sort_keys=True)
    for old, new in renames.items():
        text = text.replace(old, new)
    return json.loads(text)


# A server's configs are immutable revisions under content-addressed keys (triton/<server>/<sha>/...): every
# change, a rename included, writes a new revision beside the old one, which is retained for the pods still
# reading it (tests/components/test_workloads.py), so they are not carried over but added.
REVISIONS = "aws:s3/bucketObjectv2:BucketObjectv2"


def created(result: PreviewResult) -> list[Recorded]:
    """What the program creates (the stack itself and the configs' revisions aside)."""
    return [r for r in result.resources if r.type not in ("pulumi:pulumi:Stack", REVISIONS)]


def carried_over(before: PreviewResult, after: PreviewResult) -> dict[str, Recorded]:
    """Old URN -> the resource that takes it over (the same URN, or one aliasing it)."""
    claims = {}
    for resource in created(after):
        for urn in {resource.urn} | alias_urns(resource):
            claims[urn] = resource
    return {r.urn: claims[r.urn] for r in created(before) if r.urn in claims}


def revisions(before: PreviewResult, after: PreviewResult, renames: dict[str, str]) -> dict[str, str]:
    """Each renamed server's config revision (its S3 prefix's hash covers keys holding the server's name)."""
    def of(result: PreviewResult) -> dict[str, str]:
        return {r.inputs["key"].split("/")[1]: r.inputs["key"].split("/")[2] for r in result.resources
                if r.type == REVISIONS}
    old, new = of(before), of(after)
    return {old[name]: new[renamed] for name, renamed in renames.items() if name in old and renamed in new}


def digests(old: Recorded, new: Recorded) -> dict[str, str]:
    """A Deployment's repository digest covers its configs' S3 keys, which hold the server's name."""
    if old.type not in ("kubernetes:apps/v1:Deployment", "kubernetes:argoproj.io/v1alpha1:Rollout"):
        return {}
    notes = [r.inputs["spec"]["template"]["metadata"].get("annotations", {}) for r in (old, new)]
    return {notes[0][REPOSITORY_DIGEST]: notes[1][REPOSITORY_DIGEST]} if REPOSITORY_DIGEST in notes[0] else {}


@pytest.mark.parametrize("stack", STACKS)
def test_a_stack_deployed_under_the_old_names_keeps_every_resource(deployed_before, runs, stack):
    before, renames = deployed_before[0][stack], deployed_before[1][stack]
    after = runs[stack]
    assert renames, "the example's servers were named after a member before"
    taken = carried_over(before, after)
    assert sorted(r.urn for r in created(before) if r.urn not in taken) == []  # nothing deleted
    assert sorted(r.urn for r in created(after) if r not in taken.values()) == []  # nothing created beside
    for old in created(before):
        new = taken[old.urn]
        # the whole digest first: the revision is its first 16 hex digits
        expected = renamed(old.inputs, digests(old, new) | renames | revisions(before, after, renames))
        assert expected == new.inputs, f"{old.urn} changed beyond its name"
    aliased = [r for r in after.resources if alias_urns(r)]
    assert {r.type for r in aliased} >= {"modelfleet:index:TritonServer", "aws:iam/role:Role"}
    assert {r.type for r in aliased} & {"kubernetes:apps/v1:Deployment", "kubernetes:argoproj.io/v1alpha1:Rollout"}


def test_the_check_sees_a_resource_left_behind(deployed_before, runs):
    """Without its aliases the server's resources would be deleted and created anew."""
    before, after = deployed_before[0]["prod"], runs["prod"]
    stripped = PreviewResult(after.stack, [Recorded(r.type, r.name, r.urn, r.parent, r.inputs) for r in after.resources])
    left = [urn for urn in (r.urn for r in created(before)) if urn not in carried_over(before, stripped)]
    assert left and all("triton-image-preprocessor" in urn for urn in left)
