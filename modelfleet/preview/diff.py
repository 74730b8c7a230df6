"""What `pulumi up` would change, going from the base branch's program output to the pull request's: two
offline previews (each the real program under mocks, as a first deploy) compared resource by resource.

A resource is the same one on both sides when its URN is, or when the head's resource names the base's as
an alias (a renamed Triton server). Then:

- **created** / **deleted**: only on one side (a protected resource cannot be deleted: `pulumi up` stops);
- **replaced**: an input changed that the provider cannot change in place (``REPLACED_BY``: the AWS
  provider's ForceNew arguments, for the types modelfleet creates, and the Kubernetes fields the API server
  keeps immutable), so Pulumi creates a new one and deletes the old (a protected one stops it);
- **updated**: other inputs changed (paths under the resource's ``ignoreChanges`` do not count). Two updates
  say what they set off: a node group whose launch template changes gets a new template version, which EKS
  rolls out by replacing the group's nodes (a **node roll**); a workload whose pod template changes rolls
  its pods.

What this cannot see: the live state (a desired size the cluster autoscaler set, drift), and inputs only
known after a real deploy. It is the change between the two branches' programs, which is what a reviewer
of the pull request is asked to approve.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .format import display_name, short_type
from .runner import Recorded

Action = Literal["create", "update", "replace", "delete"]
ACTIONS: tuple[Action, ...] = ("create", "update", "replace", "delete")
SYMBOLS = {"create": "+", "update": "~", "replace": "+-", "delete": "-"}
# Inputs whose change makes the provider replace the resource. AWS: the ForceNew arguments of the
# terraform-provider-aws resources pulumi-aws wraps (aws_eks_node_group: ami_type, capacity_type,
# cluster_name, disk_size, instance_types, node_group_name(_prefix), node_role_arn, remote_access,
# subnet_ids, launch_template.id/name; its launch_template.version, release_version and version are updates
# that roll the nodes). Kubernetes: an object's name and namespace, and the fields the API server refuses to
# change (a workload's selector, a Service's clusterIP).
REPLACED_BY: dict[str, tuple[str, ...]] = {
    "aws:eks/nodeGroup:NodeGroup": ("amiType", "capacityType", "clusterName", "diskSize", "instanceTypes",
                                    "nodeGroupName", "nodeGroupNamePrefix", "nodeRoleArn", "remoteAccess",
                                    "subnetIds", "launchTemplate.id", "launchTemplate.name"),
    "aws:ec2/launchTemplate:LaunchTemplate": ("name", "namePrefix"),
    "aws:iam/role:Role": ("name", "namePrefix", "path"),
    "aws:iam/rolePolicy:RolePolicy": ("name", "namePrefix", "role"),
    "aws:iam/rolePolicyAttachment:RolePolicyAttachment": ("role", "policyArn"),
    "aws:s3/bucket:Bucket": ("bucket", "bucketPrefix"),
    "aws:s3/bucketObjectv2:BucketObjectv2": ("bucket", "key"),
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock": ("bucket",),
    "aws:s3/bucketVersioning:BucketVersioning": ("bucket",),
    "aws:eks/podIdentityAssociation:PodIdentityAssociation": ("clusterName", "namespace", "serviceAccount"),
    "aws:eks/cluster:Cluster": ("name",),
    "aws:eks/addon:Addon": ("clusterName", "addonName"),
}
KUBERNETES_REPLACED_BY = ("metadata.name", "metadata.namespace")
WORKLOAD_KINDS = {"Deployment": ("spec.selector",), "DaemonSet": ("spec.selector",),
                  "StatefulSet": ("spec.selector",), "LeaderWorkerSet": (), "Service": ("spec.clusterIP",)}
POD_TEMPLATES = ("spec.template.", "spec.leaderWorkerTemplate.")
MAX_SHOWN = 4  # changed inputs named per resource; more are counted
MAX_VALUE = 40  # characters of an old or new value shown


@dataclass(frozen=True)
class ResourceChange:
    action: Action
    type: str  # short: aws:eks:NodeGroup, k8s:Deployment
    name: str  # as `modelfleet preview` shows it (namespace/name for Kubernetes objects)
    changes: tuple[str, ...] = ()  # "scalingConfig.maxSize: 7 -> 11", the replacing ones first
    notes: tuple[str, ...] = ()  # what the change sets off, or stops it


@dataclass(frozen=True)
class PreviewDiff:
    stack: str
    changes: tuple[ResourceChange, ...]
    unchanged: int

    def count(self, action: Action) -> int:
        return sum(c.action == action for c in self.changes)

    @property
    def node_rolls(self) -> int:
        return sum(any(n.startswith("node roll") for n in c.notes) for c in self.changes)


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Dotted paths to leaves: ``{"a": {"b": [1]}}`` -> ``{"a.b[0]": 1}``; empty containers are leaves."""
    out: dict[str, Any] = {}
    if isinstance(value, dict) and value:
        for key, item in value.items():
            out.update(flatten(item, f"{path}.{key}" if path else str(key)))
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            out.update(flatten(item, f"{path}[{index}]"))
    else:
        out[path] = value
    return out


def _under(path: str, roots: Sequence[str]) -> bool:
    return any(path == r or path.startswith(r + ".") or path.startswith(r + "[") for r in roots)


def _replaced_by(resource: Recorded) -> tuple[str, ...]:
    if resource.type.startswith("kubernetes:"):
        return KUBERNETES_REPLACED_BY + WORKLOAD_KINDS.get(resource.type.rsplit(":", 1)[-1], ())
    return REPLACED_BY.get(resource.type, ())


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    text = " ".join(str(text).split())
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE - 3] + "..."


def changed_paths(before: Recorded, after: Recorded) -> list[str]:
    """Input paths whose value differs, less those under the head's ignoreChanges."""
    a, b = flatten(before.inputs), flatten(after.inputs)
    return sorted(p for p in set(a) | set(b) if a.get(p, None) != b.get(p, None) or (p in a) != (p in b)
                  if not _under(p, after.ignore_changes))


def _describe(paths: list[str], before: Recorded, after: Recorded, replacing: list[str]) -> tuple[str, ...]:
    a, b = flatten(before.inputs), flatten(after.inputs)
    ordered = replacing + [p for p in paths if p not in replacing]
    shown = [f"{p}: {_shown(a[p]) if p in a else '(none)'} -> {_shown(b[p]) if p in b else '(none)'}"
             for p in ordered[:MAX_SHOWN]]
    return tuple(shown + ([f"and {len(ordered) - MAX_SHOWN} more"] if len(ordered) > MAX_SHOWN else []))


def _compare(before: Recorded, after: Recorded) -> ResourceChange | None:
    paths = changed_paths(before, after)
    if not paths:
        return None
    replacing = [p for p in paths if _under(p, _replaced_by(after))]
    notes: list[str] = []
    if replacing and after.protect:
        notes.append("protected: `pulumi up` creates the new one, then stops at deleting the old one "
                     "(run `pulumi state unprotect` on it first)")
    if not replacing and after.type.startswith("kubernetes:") and any(p.startswith(POD_TEMPLATES) for p in paths):
        notes.append("pods roll: the pod template changes")
    action: Action = "replace" if replacing else "update"
    return ResourceChange(action, short_type(after.type), display_name(after),
                          _describe(paths, before, after, replacing), tuple(notes))


def _match(base: Sequence[Recorded], head: Sequence[Recorded]) -> tuple[list[tuple[Recorded, Recorded]], list[Recorded], list[Recorded]]:
    """Pairs (by URN, else by a head alias naming a base resource of the same type), then the unpaired."""
    by_urn = {r.urn: r for r in base}
    pairs, created, used = [], [], set()
    for r in head:
        old = by_urn.get(r.urn)
        if old is None:
            names = {a.get("name") for a in r.aliases if a.get("name")}
            old = next((b for b in base if b.type == r.type and b.name in names and b.urn not in used), None)
        if old is None or old.urn in used:
            created.append(r)
        else:
            used.add(old.urn)
            pairs.append((old, r))
    return pairs, created, [r for r in base if r.urn not in used]


def _node_rolls(changes: list[ResourceChange], pairs: list[tuple[Recorded, Recorded]]) -> list[ResourceChange]:
    """A node group whose launch template is updated rolls its nodes: a new template version (the template's
    own resource tags are no part of a version)."""
    templates = {after.parent for before, after in pairs if after.type == "aws:ec2/launchTemplate:LaunchTemplate"
                 and any(not _under(p, ("tags", "tagsAll")) for p in changed_paths(before, after))}
    groups = {display_name(after): after for _, after in pairs if after.type == "aws:eks/nodeGroup:NodeGroup"
              and after.parent in templates}
    out = []
    for change in changes:
        if change.type == "aws:eks:NodeGroup" and change.name in groups and change.action == "update":
            change = ResourceChange(change.action, change.type, change.name, change.changes, change.notes + (
                "node roll: its launch template changes, so EKS replaces the group's nodes with new ones, a few "
                "at a time within the pods' disruption budgets",))
        out.append(change)
    for name, group in sorted(groups.items()):
        if not any(c.name == name and c.type == "aws:eks:NodeGroup" for c in out):
            out.append(ResourceChange("update", "aws:eks:NodeGroup", name, ("launchTemplate.version: a new version",), (
                "node roll: its launch template changes, so EKS replaces the group's nodes with new ones, a few "
                "at a time within the pods' disruption budgets",)))
    return out


def compute_preview_diff(stack: str, base: Sequence[Recorded], head: Sequence[Recorded]) -> PreviewDiff:
    """The resource changes from ``base`` to ``head`` (custom resources only: components and the stack are
    groupings, not things AWS or Kubernetes hold)."""
    base = [r for r in base if r.custom and not r.type.startswith("pulumi:providers:")]
    head = [r for r in head if r.custom and not r.type.startswith("pulumi:providers:")]
    pairs, created, deleted = _match(base, head)
    compared = [(pair, _compare(*pair)) for pair in pairs]
    changes = [c for _, c in compared if c is not None]
    changes += [ResourceChange("create", short_type(r.type), display_name(r)) for r in created]
    changes += [ResourceChange("delete", short_type(r.type), display_name(r), (), _delete_notes(r)) for r in deleted]
    changes = _node_rolls(changes, pairs)
    order = {a: i for i, a in enumerate(ACTIONS)}
    changes.sort(key=lambda c: (order[c.action], c.type, c.name))
    changed = sum(c.action in ("update", "replace") for c in changes)  # one per changed pair
    return PreviewDiff(stack, tuple(changes), len(pairs) - changed)


def _delete_notes(resource: Recorded) -> tuple[str, ...]:
    if resource.protect:
        return ("protected: `pulumi up` refuses to delete it (run `pulumi state unprotect` on it first)",)
    if resource.retain_on_delete:
        return ("retained: Pulumi forgets it but leaves it in AWS (an old revision's pods may still read it)",)
    return ()
