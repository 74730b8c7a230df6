"""What `modelfleet init` asks: every answer has a flag, a documented default, and is checked here.

With no terminal (CI, no stdin) each default is taken and printed; with one, each question not answered by a
flag is asked with its default. ``CHOICES`` is the one list the command line, the prompts, the printed summary
and docs/operations/adopting.md come from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ..spec.stack_keys import REGION_PATTERN
from ..spec.team import DNS_LABEL

GITHUB_NAME = r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,37}[A-Za-z0-9])?$"  # a GitHub organisation or user
S3_BACKEND = r"^s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9](/[A-Za-z0-9._/-]*)?$"
PULUMI_CLOUD = "pulumi-cloud"


def _backend(value: str) -> str:
    if value != PULUMI_CLOUD and not re.match(S3_BACKEND, value):
        raise ValueError(f"{value!r} is neither {PULUMI_CLOUD!r} nor an s3://<bucket>[/<prefix>] URL")
    return value


class InitChoices(BaseModel):
    """The answers; every default is the one a newcomer can run `validate`, `plan`, `cost` and the offline
    `preview` with at once, and the reason for it is beside it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # The stacks' AWS region (`aws:region` in each stack file): us-east-1 has every GPU family priced.
    region: Annotated[str, Field(pattern=REGION_PATTERN)] = "us-east-1"
    # Join an existing EKS cluster (most platform teams own theirs) or create one per stack.
    cluster: Literal["join", "create"] = "join"
    # The clusters' names: <prefix>-dev and <prefix>-prod (joined, or created with these names).
    cluster_prefix: Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9-]{0,40}$")] = "ml-serving"
    # Where Pulumi keeps the stacks' state: Pulumi Cloud (a PULUMI_ACCESS_TOKEN secret) or an s3:// bucket
    # (self-managed: the deploy role reads and writes it; a PULUMI_CONFIG_PASSPHRASE secret encrypts secrets).
    backend: Annotated[str, AfterValidator(_backend)] = PULUMI_CLOUD
    # The GitHub organisation whose teams review each model team's changes (CODEOWNERS: @<org>/<team>). In the
    # workflow, `codeowners --check` reads the repository's owner instead, so a wrong guess here fails the
    # first pull request with the command that fixes it.
    github_org: Annotated[str, Field(pattern=GITHUB_NAME)] = "my-org"
    # The GitHub team (of github_org) that owns the stacks, the workflows and models without a team.
    platform_team: Annotated[str, Field(pattern=DNS_LABEL)] = "platform"

    def cluster_name(self, stack: str) -> str:
        return f"{self.cluster_prefix}-{stack}"


@dataclass(frozen=True)
class Choice:
    field: str  # InitChoices' field
    flag: str
    question: str
    values: str  # what may be answered, for --help and the prompt


CHOICES: tuple[Choice, ...] = (
    Choice("region", "--region", "AWS region of the stacks", "an AWS region, e.g. eu-west-1"),
    Choice("cluster", "--cluster", "join an existing EKS cluster or create one", "join or create"),
    Choice("cluster_prefix", "--cluster-prefix", "cluster name prefix (<prefix>-dev, <prefix>-prod)",
           "lowercase letters, digits, '-'"),
    Choice("backend", "--backend", "Pulumi state backend", f"{PULUMI_CLOUD} or s3://<bucket>[/<prefix>]"),
    Choice("github_org", "--github-org", "GitHub organisation of the reviewing teams", "a GitHub organisation"),
    Choice("platform_team", "--platform-team", "GitHub team owning stacks/ and .github/", "a team slug"),
)


def default_of(field: str) -> str:
    return str(InitChoices.model_fields[field].default)
