"""The generated workflows: what they may do (permissions, credentials, secrets, order) read from their YAML, and
the judges: zizmor (regular and pedantic personas) and actionlint (with shellcheck where installed) find nothing
in them, for every backend and every set of stacks, and do find the classes they exist for when a workflow is
damaged. This repository's own PR workflow is the generated one plus its test job."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.scaffold import InitChoices, scaffold_files
from modelfleet.scaffold.deploy_workflow import DEPLOY_ROLE, deploy_order, render_deploy_workflow
from modelfleet.scaffold.pr_workflow import BOT, MARKER, PREVIEW_ROLE, render_pr_workflow
from tests.conftest import update_golden
from tests.scaffold.repository import WORKFLOW, this_repository_workflow

BACKENDS = ("pulumi-cloud", "s3://acme-pulumi-state/fleet")
PINNED = re.compile(r"^[\w.-]+/[\w.-]+@[0-9a-f]{40}$")


def load(text: str) -> dict:
    data = yaml.safe_load(text)
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as true
    return data


def tool(name: str) -> str:
    found = Path(sys.executable).with_name(name)
    if found.exists():
        return str(found)
    if shutil.which(name):
        return shutil.which(name)  # type: ignore[return-value]
    pytest.fail(f"{name} is not installed: it is in the test extra (pip install -e '.[test]')")


def pr(backend: str = BACKENDS[0]) -> str:
    return render_pr_workflow(version="0.1.0", backend=backend, platform_team="platform")


def deploy(backend: str = BACKENDS[0], stacks=("dev", "prod")) -> str:
    return render_deploy_workflow(version="0.1.0", backend=backend, stacks=stacks)


def written(tmp_path: Path, texts: dict[str, str]) -> list[str]:
    for name, text in texts.items():
        (tmp_path / name).write_text(text)
    return [str(tmp_path / name) for name in texts]


# ------------------------------------------------------------------------------------------------ structure
def test_the_pr_workflow_triggers_on_the_fleet_and_grants_each_job_only_what_it_uses():
    workflow = load(pr())
    assert workflow["on"]["pull_request"]["paths"][:2] == ["models.yaml", "stacks/**"]
    assert workflow["permissions"] == {}
    jobs = workflow["jobs"]
    assert jobs["cost"]["permissions"] == {"contents": "read"}  # PR-controlled code: no write token, no secret
    assert jobs["comment"]["permissions"] == {"pull-requests": "write"}
    assert jobs["preview"]["permissions"] == {"contents": "read", "id-token": "write"}
    assert not any("uses" in s and s["uses"].startswith("actions/checkout") for s in jobs["comment"]["steps"])


def test_no_secret_reaches_pull_request_code_outside_the_protected_environment():
    """Issue 23 item 6: the cost job runs the PR's files with nothing to steal; the only secrets and the OIDC
    token are in the preview job, behind the `preview` environment, never for forks; no long-lived AWS key."""
    for backend in BACKENDS:
        text, jobs = pr(backend), load(pr(backend))["jobs"]
        assert "AWS_ACCESS_KEY_ID" not in text and "AWS_SECRET_ACCESS_KEY" not in text and "aws-access-key-id" not in text
        for name, job in jobs.items():
            uses_secrets = "secrets." in yaml.safe_dump(job)
            assert uses_secrets == (name == "preview"), name
        preview = jobs["preview"]
        assert preview["environment"] == "preview"
        assert preview["if"].startswith("github.event.pull_request.head.repo.full_name == github.repository")
        (creds,) = [s for s in preview["steps"] if "configure-aws-credentials" in s.get("uses", "")]
        assert creds["with"] == {"role-to-assume": f"${{{{ vars.{PREVIEW_ROLE} }}}}", "aws-region": "${{ matrix.region }}"}


def test_no_step_writes_the_environment_of_later_steps():
    for text in (pr(), deploy(), WORKFLOW.read_text()):
        assert "GITHUB_ENV" not in text and "GITHUB_PATH" not in text


def test_the_comment_is_found_by_author_and_marker():
    (post,) = [s for s in load(pr())["jobs"]["comment"]["steps"] if s.get("name") == "Post or update the cost comment"]
    assert f"marker='{MARKER}'" in post["run"] and f"author='{BOT}'" in post["run"]
    assert 'select(.user.login == \\"$author\\" and (.body | startswith(\\"$marker\\")))' in post["run"]


def test_the_preview_runs_per_stack_in_its_region():
    cost = load(pr())["jobs"]["cost"]
    (stacks,) = [s for s in cost["steps"] if s.get("id") == "stacks"]
    assert stacks["run"] == 'python -m modelfleet stacks --format github-output >> "$GITHUB_OUTPUT"'
    assert load(pr())["jobs"]["preview"]["strategy"]["matrix"] == {"include": "${{ fromJSON(needs.cost.outputs.stacks) }}"}


@given(st.sets(st.sampled_from(["dev", "staging", "prod", "qa", "perf", "eu-prod"]), min_size=1))
@settings(max_examples=30, deadline=None)
def test_the_deploy_chain_is_ordered_each_stage_an_environment_with_its_own_concurrency(stacks):
    jobs = load(deploy(stacks=sorted(stacks)))["jobs"]
    order = deploy_order(sorted(stacks))
    assert order[0] == "dev" or "dev" not in stacks
    assert order[-1] == "prod" or "prod" not in stacks
    assert list(jobs) == [f"up-{s}" for s in order]
    for before, (name, job) in zip((None, *jobs), jobs.items()):
        stack = name.removeprefix("up-")
        assert job.get("needs") == before  # a stage starts only after the previous one succeeded
        assert job["environment"] == stack
        assert job["concurrency"] == {"group": f"deploy-{stack}", "cancel-in-progress": False}
        assert job["permissions"] == {"contents": "read", "id-token": "write"}
        steps = {s.get("name"): s for s in job["steps"]}
        assert steps["AWS credentials (the stack's deploy role)"]["with"]["role-to-assume"] == f"${{{{ vars.{DEPLOY_ROLE} }}}}"
        assert "rollouts.argoproj.io" in steps["Wait until the rollouts are healthy"]["run"]
        assert steps["How to roll back"]["if"] == "failure()"
        names = [s.get("name") for s in job["steps"]]
        assert names.index("pulumi up") < names.index("Wait until the rollouts are healthy")


def test_every_action_is_pinned_by_sha_with_its_release_in_a_comment():
    for text in (pr(), deploy(), WORKFLOW.read_text()):
        lines = [line for line in text.splitlines() if re.search(r"\buses:", line)]
        assert lines
        for line in lines:
            assert PINNED.match(line.split("uses:", 1)[1].split("#", 1)[0].strip()), line
            assert re.search(r"#\s*v\d+\.\d+\.\d+\s*$", line), line


def test_this_repositorys_workflow_is_the_generated_one_plus_its_test_job():
    wanted = this_repository_workflow()
    if update_golden():
        WORKFLOW.write_text(wanted)
    assert WORKFLOW.read_text() == wanted
    generated, own = load(pr()), load(wanted)
    assert list(own["jobs"]) == [*generated["jobs"], "test"]
    for name in generated["jobs"]:  # the same jobs but for the install line (this checkout, not the pin)
        assert yaml.safe_dump(own["jobs"][name]).replace('".[pulumi]"', "-r requirements.txt") == \
            yaml.safe_dump(generated["jobs"][name])


# ------------------------------------------------------------------------------------------------ the judges
@pytest.mark.judge
@pytest.mark.parametrize("persona", ["regular", "pedantic"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_zizmor_finds_nothing_in_the_generated_workflows(tmp_path, persona, backend):
    files = written(tmp_path, {"models-pr.yml": pr(backend), "deploy.yml": deploy(backend, ("dev", "staging", "prod"))})
    result = subprocess.run([tool("zizmor"), "--offline", f"--persona={persona}", "--format=plain", *files],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout + result.stderr


@pytest.mark.judge
@pytest.mark.parametrize("backend", BACKENDS)
def test_actionlint_finds_nothing_in_the_generated_workflows(tmp_path, backend):
    files = written(tmp_path, {"models-pr.yml": pr(backend), "deploy.yml": deploy(backend, ("dev", "staging", "prod"))})
    result = subprocess.run([tool("actionlint"), "-no-color", *files, str(WORKFLOW)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.judge
def test_the_judges_catch_what_they_are_here_for(tmp_path):
    """Not vacuous: a PR title in a script (template injection), a tag pin and a persisted token (zizmor), and a job
    output that does not exist (actionlint) are each reported."""
    text = pr().replace("python -m modelfleet validate", 'echo "${{ github.event.pull_request.title }}"')
    text = re.sub(r"actions/setup-python@[0-9a-f]{40}", "actions/setup-python@v5", text)
    text = text.replace("          persist-credentials: false  # nothing pushes: the token must not stay in .git/config\n", "", 1)
    text = text.replace("needs.cost.outputs.stacks != ''", "needs.cost.outputs.stack != ''")
    (damaged,) = written(tmp_path, {"models-pr.yml": text})
    audit = subprocess.run([tool("zizmor"), "--offline", "--format=plain", damaged], capture_output=True, text=True, check=False)
    assert audit.returncode != 0
    for finding in ("template-injection", "unpinned-uses", "artipacked"):
        assert finding in audit.stdout, finding
    lint = subprocess.run([tool("actionlint"), "-no-color", damaged], capture_output=True, text=True, check=False)
    assert lint.returncode != 0 and 'property "stack" is not defined' in lint.stdout


def test_init_writes_the_workflows_for_its_stacks_and_backend():
    files = scaffold_files(InitChoices(backend="s3://acme-state"), "9.9.9", priced_regions=("us-east-1",))
    assert "PULUMI_CONFIG_PASSPHRASE" in files[".github/workflows/deploy.yml"]
    assert "PULUMI_ACCESS_TOKEN" not in files[".github/workflows/models-pr.yml"]
    assert list(load(files[".github/workflows/deploy.yml"])["jobs"]) == ["up-dev", "up-prod"]
    assert files["requirements.txt"].endswith("modelfleet[pulumi]==9.9.9\n")
    assert "python -m pip install --disable-pip-version-check --no-compile -r requirements.txt" in files[".github/workflows/models-pr.yml"]
