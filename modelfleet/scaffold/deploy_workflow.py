"""The deploy workflow (.github/workflows/deploy.yml) `modelfleet init` writes: on a merge to the default branch,
`pulumi up` for each stack in order (dev, then any others, staging, prod), each stage a job.

- Each stage is a GitHub environment named for its stack: its required reviewers approve it, and its deploy
  role's ARN (a variable) and Pulumi secret live there. The role is assumed through OIDC: no AWS key is stored.
- Each stage has its own concurrency group and never cancels a deploy in progress; a newer merge waits.
- A stage ends only when its rollouts are healthy: every Argo Rollouts ``Rollout`` of the stack's namespace in
  phase Healthy (an aborted canary is Degraded: the stage fails at once), every Deployment and LeaderWorkerSet
  rolled out. Only then does the next stage start.
- A failed stage stops the chain, and says how to roll back: `pulumi up` of the previous commit for that stack
  (or a revert of the pull request, which deploys through the same chain).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import actions as a
from .pr_workflow import GENERATED_INSTALL, fill, pulumi_env, setup_steps

DEPLOY_ROLE = "MODELFLEET_DEPLOY_ROLE_ARN"  # a variable of each stack's environment
ORDER_FIRST, ORDER_LAST = ("dev",), ("staging", "prod")
HEALTHY_TIMEOUT_S = 3600  # a canary's steps and pauses (docs/operations/day-two.md) fit in an hour

HEAD = """\
# @@ORIGIN@@
# On a merge to the default branch: `pulumi up` for @@CHAIN@@, in that order. Each stage is a
# GitHub environment named for its stack (its required reviewers approve it; its deploy role and Pulumi secret
# live there, the role assumed through OIDC: no AWS key is stored), has its own concurrency group, and ends
# only when the stack's rollouts are healthy. A failed stage stops the chain and says how to roll back.
# Add a stack: copy a stage, name its stack, and chain it with `needs:` (`modelfleet stacks` lists the order).
name: deploy

on:
  push:
    branches: [main]
    paths:
      - models.yaml
      - "stacks/**"
      - Pulumi.yaml
      - __main__.py
      - requirements.txt
      - .github/workflows/deploy.yml
  workflow_dispatch: {}

permissions: {}  # none at the workflow level; each stage asks for what it uses

concurrency:
  group: deploy  # one chain at a time: a newer merge waits for the running one, never cancels it
  cancel-in-progress: false

jobs:
"""

STAGE = """\
  @@JOB@@:
    name: pulumi up @@STACK@@
@@NEEDS@@\
    runs-on: ubuntu-latest
    environment: @@STACK@@  # required reviewers; the deploy role's ARN and the Pulumi secret
    concurrency:
      group: deploy-@@STACK@@
      cancel-in-progress: false
    timeout-minutes: 120
    permissions:
      contents: read  # check out the merged commit
      id-token: write  # OIDC: assume the stack's deploy role; no AWS key is stored
    steps:
@@SETUP@@\
      - uses: @@PULUMI@@
      - name: The stack's region, cluster and namespace
        id: stack
        env:
          STACK: @@STACK@@
        run: python -m modelfleet stacks --stack "$STACK" --format github-output >> "$GITHUB_OUTPUT"
      - name: AWS credentials (the stack's deploy role)
        uses: @@AWS_CREDENTIALS@@
        with:
          role-to-assume: ${{ vars.@@ROLE@@ }}
          aws-region: ${{ steps.stack.outputs.region }}
      - name: pulumi up
        env:
          STACK: @@STACK@@
@@PULUMI_ENV@@
        run: pulumi up --stack "$STACK" --yes --non-interactive --diff
      - name: Wait until the rollouts are healthy
        env:
          REGION: ${{ steps.stack.outputs.region }}
          CLUSTER: ${{ steps.stack.outputs.cluster }}
          NAMESPACE: ${{ steps.stack.outputs.namespace }}
          TIMEOUT_S: "@@TIMEOUT@@"
        run: |
@@WAIT@@
      - name: How to roll back
        if: failure()
        env:
          STACK: @@STACK@@
          BEFORE: ${{ github.event.before }}
          SHA: ${{ github.sha }}
        run: |
          {
            echo "### Deploy of $STACK failed at $SHA: the stages after it did not run"
            echo
            echo "Roll back: run \\`pulumi up --stack $STACK\\` at the previous commit, \\`git checkout ${BEFORE:-<previous commit>}\\`"
            echo "(an aborted canary already serves its stable pods), or revert the pull request: its merge deploys the"
            echo "previous models.yaml through the same chain."
          } | tee -a "$GITHUB_STEP_SUMMARY"
          echo "::error title=deploy of $STACK failed::roll back with pulumi up --stack $STACK at ${BEFORE:-the previous commit}"

"""

WAIT = r"""aws eks update-kubeconfig --name "$CLUSTER" --region "$REGION" > /dev/null
deadline=$((SECONDS + TIMEOUT_S))
has() { kubectl get crd "$1" > /dev/null 2>&1; }
for workload in $(kubectl -n "$NAMESPACE" get deployments -o name); do
  kubectl -n "$NAMESPACE" rollout status "$workload" --timeout="$((deadline - SECONDS))s"
done
if has leaderworkersets.leaderworkerset.x-k8s.io; then
  for group in $(kubectl -n "$NAMESPACE" get leaderworkersets.leaderworkerset.x-k8s.io -o name); do
    kubectl -n "$NAMESPACE" wait "$group" --for=condition=Available --timeout="$((deadline - SECONDS))s"
  done
fi
if has rollouts.argoproj.io; then
  for rollout in $(kubectl -n "$NAMESPACE" get rollouts.argoproj.io -o name); do
    until phase=$(kubectl -n "$NAMESPACE" get "$rollout" -o jsonpath='{.status.phase}') && [ "$phase" = Healthy ]; do
      if [ "$phase" = Degraded ] || [ "$SECONDS" -ge "$deadline" ]; then
        echo "::error title=$rollout is ${phase:-not reported}::the canary was aborted or did not finish in time"
        exit 1
      fi
      sleep 15
    done
  done
fi
echo "every rollout in $NAMESPACE is healthy"
"""


def deploy_order(stacks: Sequence[str]) -> tuple[str, ...]:
    """dev first, staging then prod last, any other stack in between (alphabetically)."""
    middle = sorted(s for s in stacks if s not in ORDER_FIRST + ORDER_LAST)
    return (*[s for s in ORDER_FIRST if s in stacks], *middle, *[s for s in ORDER_LAST if s in stacks])


def _job_id(stack: str) -> str:
    return "up-" + "".join(c if c.isalnum() or c in "-_" else "-" for c in stack)


def render_deploy_workflow(*, version: str, backend: str, stacks: Sequence[str], install: str = GENERATED_INSTALL,
                           origin: str | None = None) -> str:
    order = deploy_order(stacks)
    head = fill(HEAD, ORIGIN=origin or f"Generated by `modelfleet init` (modelfleet {version}).",
                CHAIN=" -> ".join(order))
    wait = "".join(f"          {line}\n" if line else "\n" for line in WAIT.splitlines())
    jobs = [fill(STAGE, JOB=_job_id(stack), STACK=stack, NEEDS=f"    needs: {_job_id(before)}\n" if before else "",
                 SETUP=setup_steps(install), PULUMI=a.PULUMI, AWS_CREDENTIALS=a.AWS_CREDENTIALS, ROLE=DEPLOY_ROLE,
                 PULUMI_ENV=pulumi_env(backend), TIMEOUT=str(HEALTHY_TIMEOUT_S), WAIT=wait.rstrip("\n"))
            for before, stack in zip((None, *order), order)]
    return head + "".join(jobs).rstrip("\n") + "\n"
