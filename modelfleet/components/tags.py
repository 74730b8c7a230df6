"""The ``modelfleet.io/team`` tag on every AWS resource a component creates that takes tags (issue 17, #12).

A resource transformation on the component: it reaches every child, so no resource type can be forgotten,
and it leaves resources AWS cannot tag alone (inline role policies, policy attachments, a bucket's public
access block and versioning). The team is the deploy plan's (modelfleet.plan.teams), not decided here.
"""

from __future__ import annotations

import inspect
from functools import cache

import pulumi

from modelfleet.deploy.types import TEAM_LABEL


@cache
def _taggable(resource_type: type) -> bool:
    init = getattr(resource_type, "_internal_init", None)
    return init is not None and "tags" in inspect.signature(init).parameters


def team_tags(team: str) -> pulumi.ResourceTransformation:
    def add(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        if not args.type_.startswith("aws:") or not _taggable(type(args.resource)):
            return None
        props = dict(args.props)
        props["tags"] = {**(props.get("tags") or {}), TEAM_LABEL: team}
        return pulumi.ResourceTransformationResult(props, args.opts)
    return add


def team_options(team: str, opts: pulumi.ResourceOptions | None = None) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(transformations=[team_tags(team)]))
