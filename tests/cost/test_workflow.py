"""The pull-request workflow runs: every `run:` step of .github/workflows/models-pr.yml is executed here,
in order, the way GitHub Actions would (bash -eo pipefail, the workflow's env with its expressions filled
in), on a clone of the example whose PR branch adds a 70B model. `gh` and `pulumi` are stand-ins that
record their arguments; every other command is the project's own.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.cost.test_diff import ADDITION, GIT

WORKFLOW = ROOT / ".github" / "workflows" / "models-pr.yml"
INSTALL = "bash scripts/setup.sh"  # .ci/run runs this same script; installing from PyPI is not a unit test
STUB = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$STUB_LOG"
if [ "$(basename "$0")" = gh ] && [ "$1" = api ] && [ "$2" != --method ]; then echo "${GH_EXISTING_COMMENT:-}"; fi
"""


def load_workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def expressions(has_cloud: bool) -> dict[str, str]:
    return {"github.base_ref": "main", "github.token": "test-token", "github.event.pull_request.number": "7",
            "github.repository": "acme/models",
            "secrets.AWS_ACCESS_KEY_ID != '' && secrets.PULUMI_ACCESS_TOKEN != ''": str(has_cloud).lower(),
            "secrets.PULUMI_ACCESS_TOKEN": "pul-test" if has_cloud else ""}


def fill(value: str, known: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        expression = match.group(1).strip()
        assert expression in known, f"the test does not know how to evaluate ${{{{ {expression} }}}}"
        return known[expression]
    return re.sub(r"\$\{\{(.*?)\}\}", one, str(value))


def condition(step: dict, env: dict[str, str]) -> bool:
    test = step.get("if")
    if test is None:
        return True
    match = re.fullmatch(r"env\.(\w+) (==|!=) '(\w+)'", test.strip())
    assert match, f"unsupported if: {test}"
    name, op, value = match.groups()
    return (env.get(name) == value) == (op == "==")


def clone_with_pr(tmp_path: Path) -> Path:
    """origin: the example on main; the checkout: a PR branch adding a 70B model, origin/main fetched."""
    origin, work = tmp_path / "origin", tmp_path / "work"
    origin.mkdir()
    for name in ("models.yaml", "Pulumi.yaml"):
        shutil.copy(ROOT / name, origin / name)
    shutil.copytree(ROOT / "stacks", origin / "stacks")
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "base"]):
        subprocess.run([*GIT, "-C", str(origin), *args], check=True)
    subprocess.run([*GIT, "clone", "-q", str(origin), str(work)], check=True)
    subprocess.run([*GIT, "-C", str(work), "checkout", "-q", "-b", "add-70b"], check=True)
    with open(work / "models.yaml", "a") as handle:
        handle.write(ADDITION)
    return work


def run_workflow(work: Path, tmp_path: Path, has_cloud: bool, existing_comment: str = "") -> list[str]:
    """Run every applicable `run:` step; returns the names of the steps run. Fails on the first failure."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("gh", "pulumi"):
        (bin_dir / tool).write_text(STUB)
        (bin_dir / tool).chmod(0o755)
    workflow, known = load_workflow(), expressions(has_cloud)
    (job,) = workflow["jobs"].values()
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "PYTHONPATH": str(ROOT),
           "STUB_LOG": str(tmp_path / "calls.log"), "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
           "GH_EXISTING_COMMENT": existing_comment}
    env.update({k: fill(v, known) for k, v in {**workflow.get("env", {}), **job.get("env", {})}.items()})
    env["PYTHON"] = sys.executable  # the workflow's .venv/bin/python, i.e. scripts/setup.sh's interpreter
    ran = []
    for step in job["steps"]:
        if "run" not in step or not condition(step, env):
            continue
        if step["run"].strip() == INSTALL:
            ran.append(step["name"])
            continue
        step_env = {**env, **{k: fill(v, known) for k, v in step.get("env", {}).items()}}
        result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                                cwd=work, env=step_env, capture_output=True, text=True)
        assert result.returncode == 0, f"step {step['name']!r} failed:\n{result.stdout}\n{result.stderr}"
        ran.append(step["name"])
    return ran


def calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def test_the_workflow_runs_for_pull_requests_touching_the_catalogue():
    workflow = load_workflow()
    assert workflow["on"]["pull_request"]["paths"][0] == "models.yaml"
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "write"}
    steps = next(iter(workflow["jobs"].values()))["steps"]
    assert any(s.get("run", "").strip() == INSTALL for s in steps)
    assert INSTALL in (ROOT / ".ci" / "run").read_text()  # the install step is CI's own


def test_without_secrets_every_step_runs_and_preview_is_skipped_with_a_notice(tmp_path):
    work = clone_with_pr(tmp_path)
    ran = run_workflow(work, tmp_path, has_cloud=False)
    assert ran == ["Install", "Validate models.yaml and every stack", "Cost diff against the base branch",
                   "Post or update the cost comment",
                   "Render every stack (fails on policy violations and budgets in fail mode)",
                   "pulumi preview skipped"]
    comment = (work / "cost-comment.md").read_text()
    assert comment.startswith("<!-- modelfleet-cost -->\n### modelfleet cost: +34,468.32 USD/month")
    assert "| prod | 197,780.91 | 213,100.17 | **+15,319.25 (+7.7%)** |" in comment
    assert (tmp_path / "summary.md").read_text() == comment
    log = calls(tmp_path)
    assert log[0].startswith("gh api repos/acme/models/issues/7/comments --paginate --jq")
    assert log[1] == "gh pr comment 7 --repo acme/models --body-file cost-comment.md"
    assert not any(c.startswith("pulumi") for c in log)
    for stack in ("dev", "prod", "staging"):
        assert (work / "out" / stack / "plan.json").exists()


def test_the_comment_is_updated_in_place_and_preview_runs_with_secrets(tmp_path):
    work = clone_with_pr(tmp_path)
    ran = run_workflow(work, tmp_path, has_cloud=True, existing_comment="4242")
    assert "pulumi preview, every stack" in ran and "pulumi preview skipped" not in ran
    log = calls(tmp_path)
    assert "gh api --method PATCH repos/acme/models/issues/comments/4242 -F body=@cost-comment.md" in log
    assert not any(c.startswith("gh pr comment") for c in log)
    assert [c for c in log if c.startswith("pulumi")] == [
        f"pulumi preview --stack {s} --non-interactive --diff" for s in ("dev", "prod", "staging")]


def test_a_change_over_budget_posts_the_comment_then_fails_the_render(tmp_path):
    work = clone_with_pr(tmp_path)
    prod = work / "stacks" / "Pulumi.prod.yaml"
    prod.write_text(prod.read_text().replace("monthlyUsd: 250000", "monthlyUsd: 200000"))
    with pytest.raises(AssertionError, match=r"(?s)step 'Render every stack.*exceeds the budget of 200,000.00 USD"):
        run_workflow(work, tmp_path, has_cloud=False)
    assert "❌ over budget: prod" in (work / "cost-comment.md").read_text()
    assert any(c.startswith("gh pr comment 7") for c in calls(tmp_path))
