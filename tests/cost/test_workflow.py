"""The pull-request workflow runs: every `run:` step of .github/workflows/models-pr.yml is executed here, job by
job and in order, the way GitHub Actions would (bash -eo pipefail; the workflow's env with its expressions filled
in; a step runs only if none before it in its job failed, unless its `if:` says `!cancelled()`;
`continue-on-error` keeps a failure from failing the job; the comment job runs whatever the cost job did, the
preview job only after it succeeded, per stack of its matrix), on a clone of the example whose PR branch adds a 70B
model. `gh` and `pulumi` are stand-ins that record their arguments, `python` is the interpreter running these
tests; every other command is the project's own. Steps that `uses:` an action are not run: the artifact the cost
job keeps is the file the comment job finds in the same directory here.

The install step (`pip install ".[pulumi]"`) is the one step not re-run here: what is checked instead is that it
installs this checkout with the extra the offline preview needs (tests/test_package.py installs the wheel into
a clean venv and runs the commands from there).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT
from tests.cost.test_diff import ADDITION, BIG_COPY, GIT

pytestmark = pytest.mark.slow  # the PR workflow's steps run for real (git, preview): the full tier

WORKFLOW = ROOT / ".github" / "workflows" / "models-pr.yml"
INSTALL = 'python -m pip install --disable-pip-version-check --no-compile ".[pulumi]"'
STUB = """#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$STUB_LOG"
if [ "$(basename "$0")" = gh ] && [ "$1" = api ] && [ "$2" != --method ]; then echo "${GH_EXISTING_COMMENT:-}"; fi
if [ "$(basename "$0")" = gh ] && [ "$1" = pr ]; then cp "$7" "$STUB_LOG.body"; fi
"""
NOT_INSTALLED = {INSTALL}  # see the module docstring
PR_JOBS = ("cost", "comment", "preview")  # the order GitHub runs them in (needs: cost)


def load_workflow() -> dict:
    data = yaml.safe_load(WORKFLOW.read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def expressions(has_cloud: bool, base_ref: str = "main", matrix: dict | None = None) -> dict[str, str]:
    return {"github.base_ref": base_ref, "github.token": "test-token", "github.event.pull_request.number": "7",
            "github.repository": "acme/models", "github.server_url": "https://github.com", "github.run_id": "99",
            "vars.MODELFLEET_PREVIEW_ROLE_ARN": "arn:aws:iam::123456789012:role/preview" if has_cloud else "",
            "secrets.PULUMI_ACCESS_TOKEN": "pul-test" if has_cloud else "",
            **{f"matrix.{key}": value for key, value in (matrix or {}).items()}}


def fill(value: str, known: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        expression = match.group(1).strip()
        assert expression in known, f"the test does not know how to evaluate ${{{{ {expression} }}}}"
        return known[expression]
    return re.sub(r"\$\{\{(.*?)\}\}", one, str(value))


def should_run(step: dict, known: dict[str, str], failed: bool) -> bool:
    """GitHub's rules for the `if:` forms the workflow uses; no status function means `success() && ...`."""
    test = str(step.get("if", "")).strip()
    if test in ("${{ !cancelled() }}", "!cancelled()"):
        return True  # nothing is cancelled here
    if failed:
        return False
    if not test:
        return True
    match = re.fullmatch(r"([\w.]+) (==|!=) '([\w:/-]*)'", test)
    assert match, f"unsupported if: {test}"
    name, op, value = match.groups()
    return (known[name] == value) == (op == "==")


@dataclass
class Run:
    ran: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)  # steps that failed (continue-on-error ones included)
    job_failed: bool = False  # the cost job
    output: dict[str, str] = field(default_factory=dict)


def clone_with_pr(tmp_path: Path, change: str = ADDITION, codeowners: bool = True) -> Path:
    """origin: the example on main; the checkout: a PR branch with ``change`` appended to models.yaml (and, with
    ``codeowners``, CODEOWNERS brought up to date by `modelfleet codeowners`, as its author would)."""
    origin, work = tmp_path / "origin", tmp_path / "work"
    origin.mkdir()
    for name in ("models.yaml", "Pulumi.yaml", "__main__.py"):
        shutil.copy(ROOT / name, origin / name)
    shutil.copytree(ROOT / "stacks", origin / "stacks")
    shutil.copytree(ROOT / "samples", origin / "samples")  # warmup samples models.yaml names
    (origin / ".github").mkdir()
    shutil.copy(ROOT / ".github" / "CODEOWNERS", origin / ".github" / "CODEOWNERS")
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "base"]):
        subprocess.run([*GIT, "-C", str(origin), *args], check=True)
    subprocess.run([*GIT, "clone", "-q", str(origin), str(work)], check=True)
    subprocess.run([*GIT, "-C", str(work), "checkout", "-q", "-b", "pr"], check=True)
    with open(work / "models.yaml", "a") as handle:
        handle.write(change)
    if codeowners:
        subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(work), "codeowners", "--org", OWNER],
                       check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    return work


OWNER = "modelfleet"  # this repository's owner: its CODEOWNERS names @modelfleet/<team>


def _tools(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("gh", "pulumi"):
        (bin_dir / tool).write_text(STUB)
        (bin_dir / tool).chmod(0o755)
    # what setup-python and the install step leave on PATH: this interpreter (a symlink would lose its venv)
    (bin_dir / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python").chmod(0o755)
    return bin_dir


def run_job(name: str, run: Run, work: Path, base_env: dict[str, str], known: dict[str, str]) -> bool:
    """One job's `run:` steps; True when the job succeeded."""
    job, failed = load_workflow()["jobs"][name], False
    env = {**base_env, **{k: fill(v, known) for k, v in job.get("env", {}).items()}}
    for step in job["steps"]:
        if "run" not in step or not should_run(step, known, failed):
            continue
        run.ran.append(step["name"])
        if step["run"].strip() in NOT_INSTALLED:
            continue
        step_env = {**env, **{k: fill(v, known) for k, v in step.get("env", {}).items()}}
        result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                                cwd=work, env=step_env, capture_output=True, text=True, check=False)
        run.output[step["name"]] = run.output.get(step["name"], "") + result.stdout + result.stderr
        if result.returncode != 0:
            run.failed.append(step["name"])
            failed = failed or not step.get("continue-on-error", False)
    return not failed


def run_workflow(work: Path, tmp_path: Path, has_cloud: bool, existing_comment: str = "",
                 base_ref: str = "main") -> Run:
    bin_dir, known = _tools(tmp_path), expressions(has_cloud, base_ref)
    outputs = tmp_path / "github-output"
    outputs.write_text("")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "STUB_LOG": str(tmp_path / "calls.log"),
           "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"), "GITHUB_OUTPUT": str(outputs),
           "GITHUB_REPOSITORY_OWNER": OWNER, "GH_EXISTING_COMMENT": existing_comment,
           "PYTHONPATH": str(ROOT)}  # the code under test: this checkout (the venv's editable install may differ)
    assert list(load_workflow()["jobs"])[:3] == list(PR_JOBS)
    run = Run()
    run.job_failed = not run_job("cost", run, work, env, known)
    run_job("comment", run, work, env, known)
    stacks = dict(line.split("=", 1) for line in outputs.read_text().splitlines() if "=" in line).get("stacks")
    if not run.job_failed and stacks:  # a same-repository pull request here
        for matrix in json.loads(stacks):
            run_job("preview", run, work, env, expressions(has_cloud, base_ref, matrix))
    return run


def calls(tmp_path: Path) -> list[str]:
    log = tmp_path / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


def posted(tmp_path: Path) -> str:
    return (tmp_path / "calls.log.body").read_text()


COST, POST = "Cost diff against the base branch", "Post or update the cost comment"
PREVIEW = "Offline preview against the base branch"
VALIDATE = "Validate models.yaml and every stack"
RENDER = "Render every stack (fails on policy violations and budgets in fail mode)"


def test_the_workflow_runs_for_everything_that_changes_the_figures():
    workflow = load_workflow()
    assert workflow["on"]["pull_request"]["paths"] == [
        "models.yaml", "stacks/**", "Pulumi.yaml", "__main__.py", "requirements.txt", ".github/CODEOWNERS",
        ".github/workflows/models-pr.yml", "modelfleet/**", "pyproject.toml", "scripts/**", "tests/**", ".ci/run"]
    assert workflow["permissions"] == {}  # each job asks for its own (zizmor: excessive-permissions)
    jobs = workflow["jobs"]
    assert jobs["cost"]["permissions"] == {"contents": "read"}
    assert jobs["comment"]["permissions"] == {"pull-requests": "write"}


def test_the_install_step_installs_this_checkout_for_the_tested_python():
    steps = load_workflow()["jobs"]["cost"]["steps"]
    (install,) = [s for s in steps if s.get("name") == INSTALL_STEP]
    assert install["run"].strip() == INSTALL  # the pull request's compiler, with the offline preview's extra
    python = next(s for s in steps if s.get("uses", "").startswith("actions/setup-python"))["with"]["python-version"]
    assert sys.version_info[:2] == tuple(map(int, python.split(".")))  # the workflow's Python is the tested one


INSTALL_STEP, CODEOWNERS = "Install modelfleet", "CODEOWNERS matches the teams in models.yaml"
STACKS = "Stacks and their regions, for the preview job"
COST_JOB = ["Install modelfleet", COST, PREVIEW, VALIDATE, RENDER, CODEOWNERS, STACKS]


def test_without_secrets_every_step_runs_and_preview_is_skipped_with_a_notice(tmp_path):
    work = clone_with_pr(tmp_path)
    run = run_workflow(work, tmp_path, has_cloud=False)
    assert run.ran == [*COST_JOB, POST, *["Install modelfleet", "pulumi preview skipped"] * 3] and not run.failed
    comment = (work / "cost-comment.md").read_text()
    assert comment.startswith("<!-- modelfleet-cost -->\n### modelfleet cost: +68,402.21 USD/month")
    assert "| prod (on-demand) | 216,207.53 | 248,297.68 | **+32,090.16 (+14.8%)** |" in comment
    assert "- base stacks: origin/main:stacks/" in comment  # the stacks were read at the base branch
    assert (tmp_path / "summary.md").read_text() == comment == posted(tmp_path)
    log = calls(tmp_path)
    assert log[0].startswith("gh api repos/acme/models/issues/7/comments --paginate --jq")
    assert '.user.login == \\"$author\\"' not in log[0] and '.user.login == "github-actions[bot]"' in log[0]
    assert log[1] == "gh pr comment 7 --repo acme/models --body-file cost-comment.md"
    assert not any(c.startswith("pulumi") for c in log)
    for stack in ("dev", "prod", "staging"):
        assert (work / "out" / stack / "plan.json").exists()


def test_a_new_team_without_codeowners_fails_the_check_with_the_command_that_fixes_it(tmp_path):
    work = clone_with_pr(tmp_path, codeowners=False)  # the 70B model's team `support` is new
    run = run_workflow(work, tmp_path, has_cloud=False)
    assert run.failed == [CODEOWNERS] and run.job_failed and POST in run.ran
    assert "+/models.yaml" in run.output[CODEOWNERS] and "@modelfleet/support" in run.output[CODEOWNERS]
    assert "run `modelfleet codeowners --org modelfleet` and commit it" in run.output[CODEOWNERS]


def test_without_secrets_the_comment_shows_the_offline_previews_resource_changes(tmp_path):
    """Defect 17 of #17: no AWS credentials, and still the reviewer sees what `pulumi up` would change."""
    work = clone_with_pr(tmp_path)
    run_workflow(work, tmp_path, has_cloud=False)
    comment = posted(tmp_path)
    cost, preview = comment.split("<!-- modelfleet-preview -->")
    assert cost.startswith("<!-- modelfleet-cost -->")  # one comment: the cost first, then the resources
    assert "### Offline preview: what `pulumi up` would change against `origin/main`" in preview
    # created, updated, replaced, deleted, node rolls, unchanged: the new model's objects (its weights' staging Job,
    # account, program, policy and write role among them) with its PrometheusRule and
    # dashboard; the fleet overview dashboard updated (it lists every model); the rest unchanged, the CPU server that
    # fraud-scorer runs on (with its rule, dashboard and canary analysis) among them
    assert "| prod | 20 | 3 | 0 | 0 | 0 | 108 |" in preview
    assert "| ➕ | k8s:Deployment `modelfleet/llama-3-1-70b-support` | created |" in preview
    assert ("| 🔄 | aws:eks:NodeGroup `gpu-p4d-24xlarge-od` | `scalingConfig.maxSize: 6 -> 10`; "
            "`scalingConfig.minSize: 2 -> 4`;") in preview
    assert preview in (tmp_path / "summary.md").read_text()
    # the comment docs/operations/onboarding.md pictures is this one, against `main` (see tests/test_docs.py)
    from tests.test_docs import PICTURED, REDRAW
    assert comment.replace("origin/main", "main") == PICTURED.read_text(), REDRAW


def test_the_comment_is_updated_in_place_and_preview_runs_with_secrets(tmp_path):
    work = clone_with_pr(tmp_path)
    run = run_workflow(work, tmp_path, has_cloud=True, existing_comment="4242")
    assert run.ran.count("pulumi preview") == 3 and "pulumi preview skipped" not in run.ran
    log = calls(tmp_path)
    assert "gh api --method PATCH repos/acme/models/issues/comments/4242 -F body=@cost-comment.md" in log
    assert not any(c.startswith("gh pr comment") for c in log)
    assert [c for c in log if c.startswith("pulumi")] == [  # the deploy order, one matrix job per stack
        f"pulumi preview --stack {s} --non-interactive --diff" for s in ("dev", "staging", "prod")]


def test_a_change_that_does_not_compile_still_posts_the_comment_then_fails(tmp_path):
    """The review's case: before, `cost` exited before printing anything and the old comment stayed."""
    work = clone_with_pr(tmp_path, change=BIG_COPY)
    run = run_workflow(work, tmp_path, has_cloud=False, existing_comment="4242")
    assert run.ran == [INSTALL_STEP, COST, PREVIEW, POST] and run.failed == [COST, PREVIEW] and run.job_failed
    comment = (work / "cost-comment.md").read_text()
    assert "| dev (spot, dated table) | 5,723.25 | ❌ does not compile | unknown | - |" in comment
    assert "- ❌ dev: ./models.yaml:" in comment and "big-405b-copy" in comment
    assert "| prod (on-demand) | 216,207.53 | 376,988.33 |" in comment  # the other stacks keep their figures
    assert "gh api --method PATCH repos/acme/models/issues/comments/4242 -F body=@cost-comment.md" in calls(tmp_path)
    assert "cost: 1 stack(s) do not compile: dev" in run.output[COST]


def test_a_change_over_budget_posts_the_comment_then_fails(tmp_path):
    work = clone_with_pr(tmp_path)
    prod = work / "stacks" / "Pulumi.prod.yaml"
    prod.write_text(prod.read_text().replace("monthlyUsd: 250000", "monthlyUsd: 200000"))
    run = run_workflow(work, tmp_path, has_cloud=False)
    assert run.failed == [COST, PREVIEW] and run.job_failed and RENDER not in run.ran
    comment = posted(tmp_path)
    assert "| prod | ❌ `pulumi up` stops: the program refuses the stack (see above) | | | | | |" in comment
    assert "— ❌ over budget: prod" in comment.splitlines()[1]
    assert "| ❌ 124% of 200,000.00 (desired): the render fails |" in comment
    # the budget edit is a stack change, read at the base branch and named as a cause
    assert "- stack settings: no cost change (modelfleet:budget.monthlyUsd: 250000 -> 200000)" in comment
    assert "prod: budget: prod: desired monthly cost 248,297.68 USD exceeds the budget of 200,000.00 USD" \
        in run.output[COST]


def test_no_report_at_all_still_replaces_the_old_comment(tmp_path):
    work = clone_with_pr(tmp_path)
    run = run_workflow(work, tmp_path, has_cloud=False, existing_comment="4242", base_ref="not-fetched")
    assert run.failed == [COST, PREVIEW] and run.job_failed and POST in run.ran
    assert "--base: 'origin/not-fetched' is not a file or directory" in run.output[COST]
    assert "--base: 'origin/not-fetched' is not a file or directory" in run.output[PREVIEW]
    assert (work / "cost-comment.md").read_text() == (
        "<!-- modelfleet-cost -->\n### modelfleet cost: not computed\n\nThe cost preview failed before writing a "
        "report: https://github.com/acme/models/actions/runs/99\n")
    assert "gh api --method PATCH repos/acme/models/issues/comments/4242 -F body=@cost-comment.md" in calls(tmp_path)
