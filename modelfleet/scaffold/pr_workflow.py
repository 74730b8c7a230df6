"""The pull-request workflow (.github/workflows/models-pr.yml) `modelfleet init` writes, and this repository runs
with its own install, paths and test job (tests/scaffold/test_workflows.py checks it is this text).

Three jobs, so that what a pull request controls (models.yaml, stacks/, __main__.py, requirements.txt) never
runs with a credential it could take:

- ``cost``: no secret and a read-only token. Installs modelfleet as pinned, writes the cost comment (also when
  the change does not compile) with the offline preview's resource changes, checks every stack and CODEOWNERS,
  and keeps the comment as an artifact. Fork pull requests get all of it.
- ``comment``: posts the comment, or edits the one it posted before, found by author *and* marker (someone
  else's comment with the marker is never edited). It checks nothing out and runs nothing of the pull request.
- ``preview``: ``pulumi preview`` per stack, in the stack's region, with a read-only role assumed through OIDC
  (no AWS key is stored anywhere), behind the ``preview`` environment whose reviewers approve each run, and
  never for a fork. No step writes ``$GITHUB_ENV`` or ``$GITHUB_PATH``, so no step can change a later one's
  environment.
"""

from __future__ import annotations

from . import actions as a
from .choices import PULUMI_CLOUD

MARKER = "<!-- modelfleet-cost -->"
BOT = "github-actions[bot]"  # whom GITHUB_TOKEN comments as
PREVIEW_ROLE = "MODELFLEET_PREVIEW_ROLE_ARN"  # a variable of the `preview` environment
PATHS = ("models.yaml", '"stacks/**"', "Pulumi.yaml", "__main__.py", "requirements.txt", ".github/CODEOWNERS",
         ".github/workflows/models-pr.yml")
GENERATED_INSTALL = "-r requirements.txt"

HEAD = """\
# @@ORIGIN@@
# Every pull request that changes the fleet gets one comment: what it costs per stack against the base branch,
# and what `pulumi up` would change (the offline preview, under Pulumi's mocks). Three jobs, so that what the
# pull request controls never runs with a credential it could take:
# - cost: no secret, a read-only token; fork pull requests get it too. Writes the comment first (also when the
#   change does not compile: the failing stacks are its ❌ rows, then the job fails), checks every stack and
#   CODEOWNERS, and keeps the comment as an artifact.
# - comment: posts it, or edits the one it posted before (found by author and marker). Checks nothing out.
# - preview: `pulumi preview` per stack in its region, with a read-only role assumed through OIDC (no AWS key is
#   stored), behind the `preview` environment (its reviewers approve each run), never for forks.
name: models pull request

on:
  pull_request:
    paths:
@@PATHS@@
permissions: {}  # none at the workflow level; each job asks for what it uses

concurrency:
  group: models-pr-${{ github.event.pull_request.number }}
  cancel-in-progress: true

jobs:
"""

SETUP = """\
      - uses: @@CHECKOUT@@
        with:
          fetch-depth: @@DEPTH@@
          persist-credentials: false  # nothing pushes: the token must not stay in .git/config
      - uses: @@SETUP_PYTHON@@
        with:
          python-version: "@@PYTHON@@"
      - name: Install modelfleet
        # --no-compile: bytecode for the few modules a run imports is written when they are imported; compiling
        # all of pulumi-aws's at install time took two thirds of the step's CPU
        run: python -m pip install --disable-pip-version-check --no-compile @@INSTALL@@
"""

COST = """\
  cost:
    name: Cost and offline preview
    runs-on: ubuntu-latest
    permissions:
      contents: read  # check out the pull request and its base branch
    outputs:
      stacks: ${{ steps.stacks.outputs.stacks }}
    steps:
@@SETUP@@\
      - name: Cost diff against the base branch
        # models.yaml, stacks/ and the price table, each read at the base branch too. Exit 2: a stack does not
        # compile; 3: a policy or a `fail` budget blocks one. The report is written first either way.
        env:
          BASE_REF: ${{ github.base_ref }}
        run: |
          status=0
          python -m modelfleet cost --base "origin/$BASE_REF" --format markdown --fail-on budget,policy \\
            > cost-comment.md || status=$?
          if [ -s cost-comment.md ]; then cat cost-comment.md >> "$GITHUB_STEP_SUMMARY"; else rm -f cost-comment.md; fi
          exit "$status"
      - name: Offline preview against the base branch
        if: ${{ !cancelled() }}
        # Both branches' Pulumi programs under Pulumi's mocks, no credentials: what `pulumi up` would create,
        # update, replace or delete per stack, node rolls included; appended to the comment and the summary.
        env:
          BASE_REF: ${{ github.base_ref }}
        run: |
          status=0
          python -m modelfleet preview --base "origin/$BASE_REF" --format markdown > preview-comment.md || status=$?
          if [ -s preview-comment.md ] && [ -f cost-comment.md ]; then
            { echo; cat preview-comment.md; } >> cost-comment.md
            { echo; cat preview-comment.md; } >> "$GITHUB_STEP_SUMMARY"
          fi
          exit "$status"
      - name: Keep the comment for the comment job
        if: ${{ !cancelled() }}
        uses: @@UPLOAD_ARTIFACT@@
        with:
          name: cost-comment
          path: cost-comment.md
          if-no-files-found: ignore
          retention-days: 1
      - name: Validate models.yaml and every stack
        run: python -m modelfleet validate
      - name: Render every stack (fails on policy violations and budgets in fail mode)
        run: |
          for file in stacks/Pulumi.*.yaml; do
            stack=${file#stacks/Pulumi.}; stack=${stack%.yaml}
            python -m modelfleet render --stack "$stack" --out "out/$stack"
          done
      - name: CODEOWNERS matches the teams in models.yaml
        run: python -m modelfleet codeowners --check --org "$GITHUB_REPOSITORY_OWNER" --platform-team @@PLATFORM@@
      - name: Stacks and their regions, for the preview job
        id: stacks
        run: python -m modelfleet stacks --format github-output >> "$GITHUB_OUTPUT"

"""

COMMENT = """\
  comment:
    name: Post or update the cost comment
    needs: cost
    if: ${{ !cancelled() }}
    runs-on: ubuntu-latest
    permissions:
      pull-requests: write  # post or edit the one cost comment
    steps:
      - name: The cost job's comment
        uses: @@DOWNLOAD_ARTIFACT@@
        continue-on-error: true  # none when the cost job failed before writing it: said below
        with:
          name: cost-comment
      - name: Post or update the cost comment
        # A fork's token is read-only: the comment cannot be posted, the cost job's summary carries it.
        continue-on-error: true
        env:
          GH_TOKEN: ${{ github.token }}
          PR_NUMBER: ${{ github.event.pull_request.number }}
          REPO: ${{ github.repository }}
          RUN_URL: ${{ github.server_url }}/${{ github.repository }}/actions/runs/${{ github.run_id }}
        run: |
          marker='@@MARKER@@'
          author='@@BOT@@'  # the token's own comments only: another user's comment with the marker is left alone
          if [ ! -f cost-comment.md ]; then  # no report at all (the install or the base ref failed): say so
            printf '%s\\n### modelfleet cost: not computed\\n\\nThe cost preview failed before writing a report: %s\\n' \\
              "$marker" "$RUN_URL" > cost-comment.md
          fi
          id=$(gh api "repos/$REPO/issues/$PR_NUMBER/comments" --paginate \\
                 --jq ".[] | select(.user.login == \\"$author\\" and (.body | startswith(\\"$marker\\"))) | .id" | head -n 1)
          if [ -n "$id" ]; then
            gh api --method PATCH "repos/$REPO/issues/comments/$id" -F body=@cost-comment.md > /dev/null
          else
            gh pr comment "$PR_NUMBER" --repo "$REPO" --body-file cost-comment.md
          fi

"""

PREVIEW = """\
  preview:
    name: pulumi preview ${{ matrix.stack }}
    needs: cost
    # Same-repository pull requests only (a fork's run gets no OIDC token and no secret), once the stacks compile.
    if: github.event.pull_request.head.repo.full_name == github.repository && needs.cost.outputs.stacks != ''
    runs-on: ubuntu-latest
    # The pull request's own __main__.py and requirements run here with a cloud role: its reviewers approve
    # each run, and the role ARN and the Pulumi secret are this environment's, not the repository's.
    environment: preview
    strategy:
      fail-fast: false
      matrix:
        include: ${{ fromJSON(needs.cost.outputs.stacks) }}
    permissions:
      contents: read  # check out the pull request
      id-token: write  # OIDC: assume the read-only preview role; no AWS key is stored
    steps:
@@SETUP@@\
      - uses: @@PULUMI@@
        if: vars.@@ROLE@@ != ''
      - name: AWS credentials (the read-only preview role, the stack's region)
        if: vars.@@ROLE@@ != ''
        uses: @@AWS_CREDENTIALS@@
        with:
          role-to-assume: ${{ vars.@@ROLE@@ }}
          aws-region: ${{ matrix.region }}
      - name: pulumi preview
        if: vars.@@ROLE@@ != ''
        env:
          STACK: ${{ matrix.stack }}
@@PULUMI_ENV@@
        run: pulumi preview --stack "$STACK" --non-interactive --diff
      - name: pulumi preview skipped
        if: vars.@@ROLE@@ == ''
        run: >-
          echo "::notice title=pulumi preview skipped::the preview environment has no @@ROLE@@ variable
          (docs/operations/adopting.md); the cost diff and the offline preview's resource changes ran without it"
"""


def pulumi_env(backend: str, indent: int = 10) -> str:
    """The Pulumi secret a stack needs: Pulumi Cloud's token, or the passphrase of a self-managed (s3://) backend's
    stack secrets; an environment's secret either way."""
    name = "PULUMI_ACCESS_TOKEN" if backend == PULUMI_CLOUD else "PULUMI_CONFIG_PASSPHRASE"
    return " " * indent + f"{name}: ${{{{ secrets.{name} }}}}"


def fill(template: str, **values: str) -> str:
    for key, value in values.items():
        template = template.replace(f"@@{key}@@", value)
    assert "@@" not in template, template[template.index("@@"):][:40]
    return template


def setup_steps(install: str, depth: int = 1) -> str:
    return fill(SETUP, CHECKOUT=a.CHECKOUT, SETUP_PYTHON=a.SETUP_PYTHON, PYTHON=a.PYTHON_VERSION, INSTALL=install,
                DEPTH=f"{depth}" + ("  # the base branch, for `--base origin/<base>`" if depth == 0 else ""))


def render_pr_workflow(*, version: str, backend: str, platform_team: str, install: str = GENERATED_INSTALL,
                       extra_paths: tuple[str, ...] = (), extra_jobs: str = "", origin: str | None = None) -> str:
    """``install``: pip's arguments (the repository's pinned requirements.txt); ``extra_paths`` and ``extra_jobs``:
    what this repository adds (its compiler's sources, its test job)."""
    paths = "".join(f"      - {p}\n" for p in (*PATHS, *extra_paths))
    head = fill(HEAD, ORIGIN=origin or f"Generated by `modelfleet init` (modelfleet {version}).", PATHS=paths)
    cost = fill(COST, SETUP=setup_steps(install, depth=0), UPLOAD_ARTIFACT=a.UPLOAD_ARTIFACT, PLATFORM=platform_team)
    comment = fill(COMMENT, DOWNLOAD_ARTIFACT=a.DOWNLOAD_ARTIFACT, MARKER=MARKER, BOT=BOT)
    preview = fill(PREVIEW, SETUP=setup_steps(install), PULUMI=a.PULUMI, AWS_CREDENTIALS=a.AWS_CREDENTIALS,
                   ROLE=PREVIEW_ROLE, PULUMI_ENV=pulumi_env(backend))
    return head + cost + comment + preview + (f"\n{extra_jobs}" if extra_jobs else "")
