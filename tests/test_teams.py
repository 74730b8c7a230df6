"""`team` is used (issue 17, defect 12: it was accepted and used nowhere): cost per team in every cost report
(text, JSON, the PR comment's markdown), and the label `modelfleet.io/team` on every rendered Kubernetes
object and pod template, and as a tag on every AWS resource the Pulumi program creates that takes tags."""

from __future__ import annotations

import inspect
import json
import warnings

import pulumi_aws
import pytest

from modelfleet.cost.report import render_cost_json, render_cost_markdown, render_cost_text
from modelfleet.errors import SpecError
from modelfleet.plan.teams import TEAM_LABEL, team_label
from modelfleet.project import Project
from modelfleet.render.manifests import render_fleet_manifests
from modelfleet.spec.load import parse_fleet_text
from modelfleet.commands.cost import _view
from modelfleet.commands.cost_sources import price_stack, read_head
from modelfleet.cli import main
from tests.components import mocked
from tests.cost.test_diff import pull_request
from tests.conftest import ROOT

STACKS = ("dev", "prod", "staging")
TEAMS = {"resnet50-classifier": "vision-platform", "image-preprocessor": "vision-platform", "text-embedder": "search",
         "fraud-scorer": "risk", "session-recommender": "personalisation", "llama-3-1-8b-instruct": "assistants",
         "llama-3-3-70b-instruct": "assistants", "llama-3-1-405b-instruct": "research"}


def test_an_objects_team_is_its_models_one_team_or_shared():
    assert team_label(["search"]) == "search"
    assert team_label(["search", "search"]) == "search"
    assert team_label([None]) == "unassigned"
    assert team_label(["search", "risk"]) == "shared"
    assert team_label(["search", None]) == "shared"
    assert team_label([]) == "shared"  # an object of the whole fleet


@pytest.mark.parametrize("team, message", [("shared", "reserved"), ("unassigned", "reserved"),
                                           ("Vision Team", "not in the expected format")])
def test_a_team_is_a_label_value_and_not_a_reserved_word(team: str, message: str):
    text = (ROOT / "models.yaml").read_text().replace("team: risk", f"team: {team}", 1)
    with pytest.raises(SpecError, match=message) as caught:
        parse_fleet_text(text, "models.yaml")
    assert caught.value.issues[0].path.endswith(".team")


@pytest.fixture(scope="module")
def priced():
    head = read_head(Project(str(ROOT)))
    return {stack: price_stack(head, stack) for stack in STACKS}


def test_the_example_lists_every_model_under_its_team():
    models = parse_fleet_text((ROOT / "models.yaml").read_text(), "models.yaml").models
    assert {m.name: m.team for m in models} == TEAMS


@pytest.mark.parametrize("stack", STACKS)
def test_teams_add_up_to_the_models_and_the_node_groups(priced, stack: str):
    cost = priced[stack].cost
    by_team = {t.name: set(t.models) for t in cost.teams}
    assert by_team == {team: {m for m, t in TEAMS.items() if t == team and m in {c.name for c in cost.models}}
                       for team in {TEAMS[c.name] for c in cost.models}}
    for level in ("min", "desired", "max"):
        teams = sum(t.monthly_usd.at(level) for t in cost.teams)
        groups = sum(g.monthly_usd.at(level) for g in cost.node_groups)
        assert teams == pytest.approx(groups, abs=0.01)
        assert groups == pytest.approx(cost.monthly_usd.at(level), abs=0.01)  # no created cluster in the example


def test_every_cost_report_shows_cost_per_team(priced):
    views = [_view(s, priced[s]) for s in STACKS]
    text, markdown = render_cost_text(views), render_cost_markdown(views)
    data = json.loads(render_cost_json(views))
    prod = {t.name: t for t in priced["prod"].cost.teams}
    research = prod["research"].monthly_usd
    assert f"  {'research':28} {1:<9} 160,780.80 / 160,780.80 / 321,561.60" in text
    assert "| research | `llama-3-1-405b-instruct` | 160,780.80 |" in markdown
    assert {t["name"]: t["monthly_usd"]["desired"] for t in data["environments"]["prod"]["teams"]}["research"] == \
        round(research.desired, 2)
    assert "| vision-platform | `image-preprocessor`, `resnet50-classifier` | 1,025.25 |" in markdown


def test_the_pr_comment_shows_what_changes_per_team(tmp_path, capsys):
    """The diff's markdown (the PR comment): the 70B added for the team `support` is that team's whole change."""
    repo = pull_request(tmp_path)
    assert main(["--project", str(repo), "cost", "--base", "main", "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    assert "| team | before | after | change |" in markdown
    assert "| support | - | 32,090.16 | +32,090.16 |" in markdown


def _pod_templates(obj: dict) -> list[dict]:
    spec = obj.get("spec", {})
    found = [spec["template"]] if isinstance(spec.get("template"), dict) and "metadata" in spec["template"] else []
    lws = spec.get("leaderWorkerTemplate", {})
    return found + [lws[k] for k in ("leaderTemplate", "workerTemplate") if k in lws]


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_object_and_pod_carries_its_team(stack: str):
    project = Project(str(ROOT))
    plan = project.plan(stack)
    groups = render_fleet_manifests(plan, project.environment(stack).deploy)
    for workload, objects in groups.items():
        if workload == "cluster":
            expected = "shared"
        elif any(s.name == workload for s in plan.triton_servers):
            expected = team_label(TEAMS[m] for m in plan.server(workload).models)
        else:
            expected = TEAMS[workload]
        for obj in objects:
            assert obj["metadata"]["labels"][TEAM_LABEL] == expected, (workload, obj["kind"])
            for template in _pod_templates(obj):
                assert template["metadata"]["labels"][TEAM_LABEL] == expected, (workload, obj["kind"])
    assert groups["llama-3-1-405b-instruct" if stack == "prod" else "llama-3-1-8b-instruct"][0]["metadata"]["labels"][
        TEAM_LABEL] in ("research", "assistants")


def _takes_tags(token: str) -> bool:
    """Whether pulumi-aws's resource for ``aws:module/name:Name`` has a ``tags`` input."""
    _, module, name = token.split(":")
    with warnings.catch_warnings():  # importing a pulumi_aws module warns about its deprecated resources
        warnings.simplefilter("ignore", DeprecationWarning)
        resource = getattr(getattr(pulumi_aws, module.split("/")[0]), name)
    return "tags" in inspect.signature(resource._internal_init).parameters


@pytest.mark.slow  # the Pulumi program under mocks
@pytest.mark.parametrize("config", ["prod", "created-cluster"])
def test_every_deployed_object_is_labelled_or_tagged_with_its_team(config: str):
    """Under mocks, every stack resource: AWS ones that take tags have the tag, Kubernetes objects the label
    (Helm releases are no Kubernetes object of ours: their charts label what they install)."""
    result = mocked.run("prod", config=mocked.created_cluster("prod") if config != "prod" else None)
    kinds = set()
    for r in result.resources:
        if r.type.startswith("aws:") and _takes_tags(r.type):
            assert TEAM_LABEL in r.inputs.get("tags", {}), r.name
            kinds.add(r.type)
        elif r.type.startswith("kubernetes:") and not r.type.startswith("kubernetes:helm.sh/"):
            assert TEAM_LABEL in r.inputs["metadata"]["labels"], r.name
            kinds.add(r.type)
    assert {"aws:eks/nodeGroup:NodeGroup", "aws:iam/role:Role", "aws:s3/bucketObjectv2:BucketObjectv2",
            "kubernetes:core/v1:Secret", "kubernetes:apps/v1:Deployment"} <= kinds
    if config != "prod":
        assert {"aws:eks/cluster:Cluster", "aws:eks/addon:Addon"} <= kinds
    groups = mocked.of_type(result, "aws:eks/nodeGroup:NodeGroup")
    assert groups["gpu-p5-48xlarge-od-zone-1"].inputs["tags"][TEAM_LABEL] == "research"
    assert groups["gpu-g5-xlarge-od"].inputs["tags"][TEAM_LABEL] == "shared"  # five models of four teams
    templates = mocked.of_type(result, "aws:ec2/launchTemplate:LaunchTemplate")
    assert templates["gpu-p4d-24xlarge-od-lt"].inputs["tags"][TEAM_LABEL] == "assistants"
    # Not on the instances: their tags are part of the template's version, so a team joining the group would
    # roll its nodes (modelfleet/deploy/node_groups.py)
    assert TEAM_LABEL not in templates["gpu-p4d-24xlarge-od-lt"].inputs["tagSpecifications"][0]["tags"]
