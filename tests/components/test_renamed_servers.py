"""Triton servers are named after their pool or instance type now, not after a member (``triton-g5-xlarge``,
was ``triton-image-preprocessor``). The rename is free for a stack deployed under the old names: `pulumi up`
replaces, creates and deletes nothing (issue 11, item 4).

- Pulumi identity: every resource named after the server is aliased to its name under the former name.
- Physical names: the example stacks say they were deployed under the old names
  (``deploy.formerServerNames``), so each server's Kubernetes objects, selector labels, service account
  and S3 config keys keep the former name (``TritonServerPlan.kube_name``). Only labels and text change: the
  ``modelfleet.io/server`` label, the dashboards' titles and the alerts' ``workload`` label say the new name.

"Deployed under the old names" is the same program run with the plan the earlier compiler made: each server
under its former name (``TritonServerPlan.former_names``: ``triton-<anchor>``, as packing.py named it).
The two previews are compared by ``compute_preview_diff``, as ``modelfleet preview --base`` compares branches.
"""

from __future__ import annotations

import pulumi
import pytest

from modelfleet.cost import policy
from modelfleet.plan.types import FleetPlan, TritonModelPlan
from modelfleet.preview import runner as preview_runner
from modelfleet.preview.diff import changed_paths, compute_preview_diff
from modelfleet.preview.runner import PreviewResult, Recorded
from modelfleet.render.k8s.common import SERVER_LABEL
from tests.components.mocked import of_type, run, stack_config
from tests.conftest import STACKS


def as_named_before(plan: FleetPlan, deployed: frozenset[str] | None = None) -> FleetPlan:
    """The plan with every renamed server under its former name, as the earlier compiler named it; ``deployed``:
    only the servers the stack says were deployed under their former names (deploy.formerServerNames), a server
    new to the stack (none listed) being new either way."""
    former = {s.name: s.former_names[0] for s in plan.triton_servers
              if s.former_names and (deployed is None or s.former_names[0] in deployed)}
    servers = tuple(s.model_copy(update={"name": former.get(s.name, s.name), "former_names": (),
                                         "physical_name": former.get(s.name, s.name)})
                    for s in plan.triton_servers)
    models = tuple(m.model_copy(update={"server": former.get(m.server, m.server)}) if isinstance(m, TritonModelPlan)
                   else m for m in plan.models)
    groups = tuple(g.model_copy(update={"workloads": tuple(sorted(former.get(w, w) for w in g.workloads))})
                   for g in plan.node_groups)
    pipelines = tuple(p.model_copy(update={"server": former.get(p.server, p.server)}) for p in plan.pipelines)
    return plan.model_copy(update={"triton_servers": tuple(sorted(servers, key=lambda s: s.name)), "models": models,
                                   "node_groups": groups, "pipelines": pipelines})


class CarriedOver(preview_runner.FleetMocks):
    """Mocks in which an aliased resource keeps the id (and ARN) it was created with, as Pulumi carries an
    aliased resource's state over. Plain mocks derive an id from the logical name, so a renamed role would
    seem to get a new ARN and its policy a new ``role``: an artifact of the mocks, not a change."""

    renames: dict[str, str] = {}  # new server name -> former
    servers: tuple[str, ...] = ()  # every server of the plan: a name is its longest server-name prefix's

    def new_resource(self, args):
        owner = max((s for s in self.servers if s in args.name), key=len, default=None)
        if owner in self.renames:
            args = pulumi.runtime.MockResourceArgs(args.typ, args.name.replace(owner, self.renames[owner]),
                                                   args.inputs, args.provider, args.resource_id, args.custom)
        return super().new_resource(args)


@pytest.fixture(scope="module")
def previews():
    """Per stack: the program as the earlier compiler deployed it, as this one does, and the renames."""
    compile_fleet = policy.compile_fleet
    renames: dict[str, dict[str, str]] = {}
    servers: dict[str, tuple[str, ...]] = {}

    def earlier(fleet, env, catalogue, lock=None):
        plan = compile_fleet(fleet, env, catalogue, lock)
        deployed = frozenset(env.deploy.former_server_names)
        servers[env.name] = tuple(s.name for s in plan.triton_servers)
        renames[env.name] = {s.name: s.former_names[0] for s in plan.triton_servers
                             if s.former_names and s.former_names[0] in deployed}
        return as_named_before(plan, deployed)

    out = {}
    for stack in STACKS:
        patch = pytest.MonkeyPatch()
        patch.setattr(policy, "compile_fleet", earlier)
        try:
            before = run(stack)
        finally:
            patch.undo()
        patch.setattr(CarriedOver, "renames", renames[stack])
        patch.setattr(CarriedOver, "servers", servers[stack])
        patch.setattr(preview_runner, "FleetMocks", CarriedOver)
        try:
            out[stack] = (before, run(stack), renames[stack])
        finally:
            patch.undo()
    return out


# What a rename may change in place, and why: the plan's name on a label (pod templates included: the pods roll
# once, as any label change rolls them), on the dashboards (their titles and uids, so the ConfigMap's one data
# key) and on the alerts (their group's name, their workload label and text).
NAMED = (f"metadata.labels.{SERVER_LABEL}", f"spec.template.metadata.labels.{SERVER_LABEL}", "data.",
         "spec.groups[0].name", "spec.groups[0].rules[")


@pytest.mark.parametrize("stack", STACKS)
def test_a_stack_deployed_under_the_old_names_replaces_nothing(previews, stack):
    before, after, renames = previews[stack]
    assert renames, "the example's servers were named after a member before"
    diff = compute_preview_diff(stack, before.resources, after.resources)
    assert [(c.action, c.type, c.name) for c in diff.changes if c.action != "update"] == []
    assert {c.type for c in diff.changes} <= {"k8s:Deployment", "k8s:Rollout", "k8s:HorizontalPodAutoscaler",
                                              "k8s:Service", "k8s:ServiceAccount", "k8s:PodDisruptionBudget",
                                              "k8s:NetworkPolicy", "k8s:ServiceMonitor", "k8s:PrometheusRule",
                                              "k8s:ConfigMap", "k8s:AnalysisTemplate", "k8s:HTTPRoute"}
    old = {r.urn: r for r in before.resources}
    for resource in after.resources:
        if resource.urn in old and resource.custom:
            paths = changed_paths(old[resource.urn], resource)
            assert all(p.startswith(NAMED) for p in paths), (resource.urn, paths)
    workloads = {**of_type(after, "kubernetes:apps/v1:Deployment"), **of_type(after, "kubernetes:argoproj.io/v1alpha1:Rollout")}
    labelled = {w.inputs["metadata"]["labels"][SERVER_LABEL]: w.inputs["metadata"]["name"] for w in workloads.values()
                if SERVER_LABEL in w.inputs["metadata"]["labels"]}
    assert {new: labelled[new] for new in renames} == renames  # the cluster's name, and what the plan calls it


def test_the_check_sees_a_resource_left_behind(previews):
    """Without its aliases the server's role and policy would be deleted and created anew."""
    before, after, _ = previews["prod"]
    stripped = [Recorded(r.type, r.name, r.urn, r.parent, r.inputs, custom=r.custom) for r in after.resources]
    diff = compute_preview_diff("prod", before.resources, stripped)
    deleted = [c.name for c in diff.changes if c.action == "delete"]
    assert deleted and all("triton-image-preprocessor" in name for name in deleted)


def test_a_new_stack_gets_the_new_names():
    """A stack that does not say it was deployed under the old names names everything after the server."""
    config = stack_config("prod")
    config["modelfleet:deploy"] = {k: v for k, v in config["modelfleet:deploy"].items() if k != "formerServerNames"}
    result: PreviewResult = run("prod", config=config)
    names = {r.inputs["metadata"]["name"] for r in of_type(result, "kubernetes:apps/v1:Deployment").values()}
    assert "triton-g5-xlarge" in names and "triton-image-preprocessor" not in names
    keys = [r.inputs["key"] for r in result.resources if r.type == "aws:s3/bucketObjectv2:BucketObjectv2"]
    assert keys and all(not k.startswith("triton/triton-image-preprocessor/") for k in keys)


def test_a_former_name_that_matches_no_server_is_said(tmp_path):
    """A typo in deploy.formerServerNames would keep nothing, and the rename would replace in silence."""
    import shutil

    import yaml

    from modelfleet.project import Project
    from tests.conftest import ROOT

    shutil.copy(ROOT / "models.yaml", tmp_path / "models.yaml")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    path = tmp_path / "stacks" / "Pulumi.prod.yaml"
    data = yaml.safe_load(path.read_text())
    data["config"]["modelfleet:deploy"]["formerServerNames"] = ["triton-image-preprocesor"]
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    plan = Project(root=str(tmp_path)).plan("prod")
    (warning,) = [w for w in plan.warnings if w.model == "deploy.formerServerNames"]
    assert warning.message.startswith("triton-image-preprocesor is no server's former name (the servers' former "
                                      "names: ")
    assert "triton-image-preprocessor" in warning.message
    assert all(s.kube_name == s.name for s in plan.triton_servers)  # nothing kept: the typo is why
