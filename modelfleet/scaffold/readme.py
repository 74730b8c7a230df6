"""The README of a repository `modelfleet init` wrote: what is in it, how a change reaches prod, and the one-time
setup (environments, roles, secrets) the workflows need."""

from __future__ import annotations

from .choices import PULUMI_CLOUD, InitChoices
from .deploy_workflow import DEPLOY_ROLE, deploy_order
from .pr_workflow import PREVIEW_ROLE
from .project_files import DOCS

README = """\
# Model fleet

Every model this team serves, declared in `models.yaml` and deployed by [modelfleet]({docs}) {version}
(pinned in `requirements.txt`): per stack (`stacks/Pulumi.<stack>.yaml`), the EKS node groups, Triton model
repositories and vLLM deployments, with what they cost.

## Try it

```bash
python3 -m venv .venv && .venv/bin/pip install -r requirements.txt
.venv/bin/modelfleet validate && .venv/bin/modelfleet plan --stack dev && .venv/bin/modelfleet cost
.venv/bin/modelfleet preview --stack prod     # what `pulumi up` would create, under Pulumi's mocks: no AWS account
```

## A change, from pull request to prod

1. Edit `models.yaml` ([reference]({docs}/concepts/models-yaml.md)); `modelfleet cost --base origin/main`
   shows what it costs before you push.
2. Open a pull request: `.github/workflows/models-pr.yml` comments with the cost per stack and what
   `pulumi up` would change, checks every stack and that `.github/CODEOWNERS` matches the teams (run
   `modelfleet codeowners --org <your GitHub organisation>` after adding a team), and runs `pulumi preview`
   once the `preview` environment's reviewers approve it.
3. Merge: `.github/workflows/deploy.yml` runs `pulumi up` for {chain}, each stage after its environment's
   reviewers approve it and the previous stage's rollouts are healthy.

## One-time setup

- Pulumi state: {backend}
- AWS, through OIDC (no access key anywhere): an IAM OIDC provider for `token.actions.githubusercontent.com`, and
  - a read-only role for previews, trusting only `repo:<org>/<repo>:environment:preview` (`ReadOnlyAccess`{lock});
  - a deploy role per stack, trusting only `repo:<org>/<repo>:environment:<stack>`.
- GitHub environments (Settings -> Environments), each with required reviewers:
  - `preview`: variable `{preview_role}` (the read-only role's ARN) and the Pulumi secret;
  - {environments}: variable `{deploy_role}` (that stack's deploy role) and the Pulumi secret.
  Keep the secrets in the environments, not the repository: a pull request's code runs in the PR workflow.
- Branch protection on `main`: require the `Cost and offline preview` check and a code owner's review.
- The cluster: `modelfleet doctor --stack prod` lists what each stack needs it to run (and what is missing).
"""


def _backend(choices: InitChoices) -> str:
    if choices.backend == PULUMI_CLOUD:
        return ("Pulumi Cloud: the `PULUMI_ACCESS_TOKEN` secret; `pulumi login`, then `pulumi stack init dev` "
                "and `pulumi stack init prod`.")
    return (f"`{choices.backend}` (Pulumi.yaml's backend): the deploy roles read and write it; stack secrets are "
            "encrypted with the `PULUMI_CONFIG_PASSPHRASE` secret; `pulumi stack init dev` and `prod`.")


def render_readme(choices: InitChoices, version: str, stacks: tuple[str, ...]) -> str:
    order = deploy_order(stacks)
    lock = "" if choices.backend == PULUMI_CLOUD else ", plus writing the state bucket's `.pulumi/locks/`"
    return README.format(docs=DOCS, version=version, chain=" -> ".join(order), backend=_backend(choices), lock=lock,
                         preview_role=PREVIEW_ROLE, deploy_role=DEPLOY_ROLE,
                         environments=", ".join(f"`{s}`" for s in order))
