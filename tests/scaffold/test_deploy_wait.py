"""The deploy stage's health gate and its rollback note, run in bash as the workflow runs them, with `aws`,
`kubectl` and `sleep` stand-ins: a stage passes only when every Deployment rolled out and every Rollout is
Healthy, fails at once on a Degraded (aborted) canary, and a failed stage says how to roll back."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from modelfleet.scaffold.deploy_workflow import render_deploy_workflow

KUBECTL = """#!/usr/bin/env bash
echo "kubectl $*" >> "$LOG"
case "$*" in
  *"get crd rollouts.argoproj.io"*) exit 0 ;;
  *"get crd"*) exit 1 ;;
  *"get deployments -o name"*) echo deployment.apps/triton-g5; echo deployment.apps/llama ;;
  *"rollout status deployment.apps/llama"*) exit "${DEPLOY_STATUS:-0}" ;;
  *"rollout status"*) exit 0 ;;
  *"get rollouts.argoproj.io -o name"*) echo rollout.argoproj.io/fraud ;;
  *"get rollout.argoproj.io/fraud"*)
    n=$(cat "$COUNT" 2>/dev/null || echo 0); echo $((n + 1)) > "$COUNT"
    set -- $PHASES; shift "$n"; printf '%s' "${1:-$LAST}" ;;
esac
"""


def steps() -> dict[str, dict]:
    workflow = yaml.safe_load(render_deploy_workflow(version="0.1.0", backend="pulumi-cloud", stacks=("dev", "prod")))
    return {s.get("name"): s for s in workflow["jobs"]["up-prod"]["steps"]}


def run_step(tmp_path: Path, name: str, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool, text in (("kubectl", KUBECTL), ("aws", "#!/bin/sh\necho \"aws $*\" >> \"$LOG\"\n"), ("sleep", "#!/bin/sh\n")):
        (bin_dir / tool).write_text(text)
        (bin_dir / tool).chmod(0o755)
    step = steps()[name]
    log = tmp_path / "log"
    environment = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "LOG": str(log), "COUNT": str(tmp_path / "n"),
                   "GITHUB_STEP_SUMMARY": str(tmp_path / "summary"), "REGION": "eu-west-1", "CLUSTER": "ml-prod",
                   "NAMESPACE": "modelfleet", "TIMEOUT_S": "3600", "STACK": "prod", **env}
    result = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]],
                            env=environment, capture_output=True, text=True, check=False)
    return result, log.read_text().splitlines() if log.exists() else []


WAIT = "Wait until the rollouts are healthy"


def test_a_stage_waits_for_every_deployment_and_rollout_to_be_healthy(tmp_path):
    result, calls = run_step(tmp_path, WAIT, PHASES="Progressing Paused Healthy", LAST="Healthy")
    assert result.returncode == 0, result.stderr
    assert calls[0] == "aws eks update-kubeconfig --name ml-prod --region eu-west-1"
    assert any(c.startswith("kubectl -n modelfleet rollout status deployment.apps/llama --timeout=") for c in calls)
    assert sum("get rollout.argoproj.io/fraud" in c for c in calls) == 3  # polled until Healthy
    assert "every rollout in modelfleet is healthy" in result.stdout


@pytest.mark.parametrize("phases,deploy,why", [("Progressing Degraded", "0", "Degraded"),
                                                ("Healthy", "1", "deployment")])
def test_an_aborted_canary_or_a_stuck_deployment_fails_the_stage(tmp_path, phases, deploy, why):
    result, _ = run_step(tmp_path, WAIT, PHASES=phases, LAST="Healthy", DEPLOY_STATUS=deploy)
    assert result.returncode != 0
    if why == "Degraded":
        assert "::error title=rollout.argoproj.io/fraud is Degraded::" in result.stdout


def test_a_rollout_never_healthy_fails_at_the_deadline(tmp_path):
    result, _ = run_step(tmp_path, WAIT, PHASES="", LAST="Progressing", TIMEOUT_S="0")
    assert result.returncode == 1 and "is Progressing::" in result.stdout


def test_a_failed_stage_says_how_to_roll_back(tmp_path):
    assert steps()["How to roll back"]["if"] == "failure()"
    result, _ = run_step(tmp_path, "How to roll back", BEFORE="abc123", SHA="def456")
    assert result.returncode == 0
    summary = (tmp_path / "summary").read_text()
    assert "### Deploy of prod failed at def456: the stages after it did not run" in summary
    assert "Roll back: run `pulumi up --stack prod` at the previous commit, `git checkout abc123`" in summary
    assert "::error title=deploy of prod failed::roll back with pulumi up --stack prod at abc123" in result.stdout
