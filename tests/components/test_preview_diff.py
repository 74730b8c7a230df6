"""`modelfleet preview --base`: what `pulumi up` would create, update, replace or delete going from the base
branch to the pull request, from the offline preview of both (issue 17, defect 17: without cloud credentials
the PR workflow showed no preview at all; tests/cost/test_workflow.py checks the comment it now posts)."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import pytest
import yaml

from modelfleet.cli import main
from modelfleet.preview.diff import compute_preview_diff, flatten
from modelfleet.preview.runner import Recorded
from tests.conftest import ROOT
from tests.cost.test_diff import git


def resource(name: str, inputs: dict, kind: str = "aws:eks/nodeGroup:NodeGroup", **options) -> Recorded:
    return Recorded(kind, name, f"urn:pulumi:prod::modelfleet::{kind}::{name}", "", inputs, **options)


def test_inputs_are_compared_leaf_by_leaf():
    assert flatten({"a": {"b": [1, {"c": 2}]}, "d": {}}) == {"a.b[0]": 1, "a.b[1].c": 2, "d": {}}


def test_a_replacing_input_of_a_protected_group_is_said_and_ignored_changes_are_not():
    base = [resource("g", {"amiType": "AL2023_x86_64_NVIDIA", "scalingConfig": {"desiredSize": 2, "maxSize": 4}})]
    head = [resource("g", {"amiType": "BOTTLEROCKET_x86_64_NVIDIA", "scalingConfig": {"desiredSize": 3, "maxSize": 4}},
                     protect=True, ignore_changes=("scalingConfig.desiredSize",))]
    (change,) = compute_preview_diff("prod", base, head).changes
    assert change.action == "replace"
    assert change.changes == ("amiType: AL2023_x86_64_NVIDIA -> BOTTLEROCKET_x86_64_NVIDIA",)
    assert "protected" in change.notes[0] and "pulumi state unprotect" in change.notes[0]


def test_a_renamed_resource_is_matched_through_its_alias():
    base = [resource("triton-fraud-scorer-pod", {"assumeRolePolicy": "{}"}, "aws:iam/role:Role")]
    head = [resource("triton-g5-xlarge-pod", {"assumeRolePolicy": "{}"}, "aws:iam/role:Role",
                     aliases=({"name": "triton-fraud-scorer-pod"},))]
    diff = compute_preview_diff("prod", base, head)
    assert diff.changes == () and diff.unchanged == 1


def test_deleting_a_protected_or_retained_resource_says_what_happens():
    base = [resource("g", {}, protect=True), resource("o", {"key": "k"}, "aws:s3/bucketObjectv2:BucketObjectv2",
                                                        retain_on_delete=True)]
    notes = {c.name: c.notes for c in compute_preview_diff("prod", base, []).changes}
    assert "refuses to delete" in notes["g"][0] and "leaves it in AWS" in notes["o"][0]


# ---------------------------------------------------------------------------------------------- the program
def repo_with_change(tmp_path: Path, stack_changes: dict | None = None, models_edit=None) -> Path:
    """The example (program included) committed on main; the pull request's edit in the working tree."""
    for name in ("models.yaml", "Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, tmp_path / name)
    for name in ("stacks", "samples"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "base")
    if stack_changes:
        path = tmp_path / "stacks" / "Pulumi.prod.yaml"
        data = yaml.safe_load(path.read_text())
        data["config"].update(stack_changes)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
    if models_edit:
        path = tmp_path / "models.yaml"
        path.write_text(models_edit(path.read_text()))
    return tmp_path


def preview_base(repo: Path, capsys) -> str:
    code = main(["--project", str(repo), "preview", "--base", "main", "--stack", "prod"])
    out = capsys.readouterr().out
    assert code == 0, out
    return out


@pytest.fixture
def deploy_settings():
    return yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())["config"]["modelfleet:deploy"]


def test_an_ami_change_replaces_the_protected_node_groups(tmp_path, capsys, deploy_settings):
    repo = repo_with_change(tmp_path, {"modelfleet:deploy": {**deploy_settings, "amiType": "BOTTLEROCKET_x86_64_NVIDIA"}})
    out = preview_base(repo, capsys)
    assert "+- aws:eks:NodeGroup gpu-g5-xlarge-od\n       amiType: AL2023_x86_64_NVIDIA -> BOTTLEROCKET_x86_64_NVIDIA" in out
    # the CPU group's AMI follows (AL2023's standard AMI -> Bottlerocket's plain one): 7 protected replacements
    assert "+- aws:eks:NodeGroup cpu-c7i-xlarge-od\n       amiType: AL2023_x86_64_STANDARD -> BOTTLEROCKET_x86_64" in out
    assert out.count("! protected: `pulumi up` creates the new one, then stops at deleting the old one") == 7
    # Bottlerocket's AMI has NVIDIA's device plugin: the DaemonSet modelfleet adds for AL2023 goes
    assert "-  k8s:DaemonSet kube-system/nvidia-device-plugin\n" in out


def test_a_bigger_root_volume_rolls_the_nodes(tmp_path, capsys, deploy_settings):
    repo = repo_with_change(tmp_path, {"modelfleet:deploy": {**deploy_settings, "nodeDiskGib": 300}})
    out = preview_base(repo, capsys)
    assert "~  aws:ec2:LaunchTemplate gpu-g5-xlarge-od-lt\n       blockDeviceMappings[0].ebs.volumeSize: 200 -> 300" in out
    assert "! node roll: its launch template changes, so EKS replaces the group's nodes" in out
    assert "to replace, 0 to delete (7 node rolls)" in out  # the CPU group's nodes too


def test_removing_a_model_keeps_old_configs_and_rolls_its_servers_pods(tmp_path, capsys):
    # A model of the shared GPU server whose removal moves nothing else: without text-embedder, fraud-scorer
    # would come back from its CPU server (a different change), and the GPU server would become a canary.
    def drop_session_recommender(text: str) -> str:
        data = yaml.safe_load(text)
        data["models"] = [m for m in data["models"] if m["name"] != "session-recommender"]
        return yaml.safe_dump(data, sort_keys=False)
    out = preview_base(repo_with_change(tmp_path, models_edit=drop_session_recommender), capsys)
    # prod keeps the server's former name in the cluster (deploy.formerServerNames; it is triton-g5-xlarge)
    details = out.split("~  k8s:Deployment modelfleet/triton-image-preprocessor\n", 1)[1].splitlines()
    server = list(itertools.takewhile(lambda line: line.startswith(" " * 7), details))
    assert "       ! pods roll: the pod template changes" in server, server
    assert "! retained: Pulumi forgets it but leaves it in AWS" in out
    deleted = out.split("to delete", 1)[1].split("\n  -  ")[1:]
    assert any(d.startswith("aws:s3:BucketObjectv2 triton-image-preprocessor-") and "session-recommender-config.pbtxt" in d
               for d in deleted)  # the old revision's config, kept for the pods still reading it
    assert "~  k8s:HorizontalPodAutoscaler modelfleet/triton-image-preprocessor" in out  # its metric goes
