"""Fleets with adversarial names (#23), and the checks every rendered stack and deploy plan must pass.

The names are drawn where collisions live: another model's name with a suffix the compiler derives
(``-canary``, ``-stage``, ``-stage-write``, ``-slo``, ``-dashboard``...), the names of Triton servers and node
groups (``triton-<instance>``, ``gpu-<type>-spot``), names the cluster-wide objects use (``cluster``,
``modelfleet-fleet``), and names of 50 to 63 characters (sharing long prefixes, so that truncation collides).
They are written into the real example (``models.yaml``): an appended LLM, a renamed model, or a pool.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from modelfleet.deploy import DeployPlan
from modelfleet.plan.types import FleetPlan
from modelfleet.render.k8s import vllm_models

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = yaml.safe_load((ROOT / "models.yaml").read_text())
STACKS = ("dev", "staging", "prod")
PIPELINE_STEPS = {s["model"] for p in EXAMPLE.get("pipelines", []) for s in p["steps"]}
EXISTING = [m["name"] for m in EXAMPLE["models"]]
RENAMEABLE = [i for i, m in enumerate(EXAMPLE["models"]) if m["name"] not in PIPELINE_STEPS]
CLASSIC = [i for i, m in enumerate(EXAMPLE["models"]) if m["type"] != "llm" and m["name"] not in PIPELINE_STEPS]
SMALL_LLM = next(m for m in EXAMPLE["models"] if m["name"] == "llama-3-1-8b-instruct")

SUFFIXES = ("-canary", "-stage", "-stage-write", "-stage-program", "-slo", "-dashboard", "-hf-token", "-metrics",
            "-pod", "-read", "-identity", "-0", "-1", "-lt", "-stage-0e9e39f249a1")
SERVERS_AND_GROUPS = ("triton-c7i-xlarge", "triton-g5-xlarge", "triton-g6-xlarge", "triton-g6e-xlarge",
                      "triton-g4dn-xlarge", "triton-image-preprocessor", "triton-g5-xlarge-text-embedder",
                      "triton-c7i-xlarge-fraud-scorer", "gpu-g5-xlarge-od", "gpu-g5-xlarge-spot",
                      "gpu-g6e-12xlarge-spot", "cpu-c7i-xlarge-od", "gpu-p5-48xlarge-od", "system")
RESERVED = ("cluster", "modelfleet", "modelfleet-fleet", "kube-system", "nvidia-device-plugin", "default",
            "gpu-nodes", "prerequisites", "model-repository")
POOLS = ("c7i-xlarge", "g5-xlarge", "g6-xlarge", "image-preprocessor", "g5-xlarge-text-embedder", "fraud-scorer",
         "c7i-xlarge-fraud-scorer", "a", "a-text-embedder")
LONG_STEM = "x" * 40 + "-long-model-name"  # 56 characters: names built on it differ only past a truncation

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
STATEFULSET_HASH = 11  # "-" and up to 10 characters: the controller-revision-hash label is <set>-<hash>
IAM_ROLE_MAX, AUTONAME_SUFFIX = 64, 8  # Pulumi auto-names a role "<resource name>-<7 random characters>"
NODE_GROUP_MAX, NODE_GROUP_SUFFIX = 63, 26  # EKS names; the provider appends a 26-character id to a name prefix


def long_names() -> st.SearchStrategy[str]:
    return st.one_of(
        st.from_regex(r"\A[a-z][a-z0-9-]{48,61}[a-z0-9]\Z"),
        st.integers(0, 7).map(lambda n: LONG_STEM + "-" + "abcdefg"[:n]).map(lambda s: s.rstrip("-")),
        st.sampled_from(EXISTING).map(lambda n: (n + "-" + "v" * 63)[:63].rstrip("-")))


def adversarial_names() -> st.SearchStrategy[str]:
    derived = st.builds(lambda n, s: n + s, st.sampled_from(EXISTING + [LONG_STEM]), st.sampled_from(SUFFIXES))
    return st.one_of(derived, st.sampled_from(SERVERS_AND_GROUPS + RESERVED), long_names())


@st.composite
def adversarial_fleets(draw: st.DrawFn) -> str:
    """The example with 1-3 adversarial edits: an appended LLM (the 8B, staged and canaried), a renamed
    model, or a classic model's pool."""
    data = copy.deepcopy(EXAMPLE)
    for _ in range(draw(st.integers(1, 3))):
        action = draw(st.sampled_from(["llm", "llm", "rename", "pool"]))
        if action == "llm":
            data["models"].append({**copy.deepcopy(SMALL_LLM), "name": draw(adversarial_names())})
        elif action == "rename":
            data["models"][draw(st.sampled_from(RENAMEABLE))]["name"] = draw(adversarial_names())
        else:
            pool = draw(st.one_of(st.sampled_from(POOLS), long_names()))
            data["models"][draw(st.sampled_from(CLASSIC))]["pool"] = pool
    return yaml.safe_dump(data, sort_keys=False, width=10_000)


def stack_config(stack: str) -> dict[str, Any]:
    return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]


# --- what every rendered stack must be ------------------------------------------------------------------------


def manifests(files: Mapping[str, bytes]) -> Iterator[tuple[str, dict[str, Any]]]:
    for path, content in sorted(files.items()):
        if path.startswith("kubernetes/"):
            yield from ((path, d) for d in yaml.safe_load_all(content) if d)


def _label_maps(node: Any, kubernetes: bool = False) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every Kubernetes labels, annotations and matchLabels mapping of an object: its metadata's, its pod
    templates' and its selectors' (a PrometheusRule's rule labels are Prometheus's, not the API server's)."""
    if isinstance(node, dict):
        for k, v in node.items():
            if isinstance(v, dict) and (k == "matchLabels" or (kubernetes and k in ("labels", "annotations"))):
                yield k, v
            else:
                yield from _label_maps(v, k == "metadata")
    elif isinstance(node, list):
        for item in node:
            yield from _label_maps(item)


def key_problem(key: str) -> str | None:
    """A label or annotation key: an optional DNS-subdomain prefix of at most 253, a name of at most 63."""
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not DNS_SUBDOMAIN.match(prefix)):
        return f"key prefix {prefix!r}"
    if len(name) > 63 or not QUALIFIED_NAME.match(name):
        return f"key name {name!r}"
    return None


def render_problems(plan: FleetPlan, files: Mapping[str, bytes]) -> list[str]:
    """Every (kind, namespace, name) once, every name, label and annotation key within the API server's
    limits, and every planned workload (and the Namespace) present: an overwritten one would be missing."""
    problems, seen = [], {}
    for path, obj in manifests(files):
        meta = obj["metadata"]
        key = (obj["kind"], meta.get("namespace", ""), meta["name"])
        if key in seen:
            problems.append(f"{key} in {seen[key]} and {path}")
        seen[key] = path
        if len(meta["name"]) > 63 or not DNS_LABEL.match(meta["name"]):
            problems.append(f"{key}: name of {len(meta['name'])} characters")
        if obj["kind"] == "LeaderWorkerSet":  # a StatefulSet per group: <name>-<group>-<revision hash>
            groups = obj["spec"].get("replicas", 1)
            longest = len(f"{meta['name']}-{max(0, groups - 1)}") + STATEFULSET_HASH
            if longest > 63:
                problems.append(f"{key}: its groups' revision-hash labels have {longest} characters")
        for which, mapping in _label_maps(obj):
            for k, v in mapping.items():
                if problem := key_problem(k):
                    problems.append(f"{key}: {which} {problem}")
                if which != "annotations" and (len(str(v)) > 63 or not LABEL_VALUE.match(str(v))):
                    problems.append(f"{key}: {which} value {v!r}")
    names = {(k[0], k[2]) for k in seen}
    workload = ("Deployment", "Rollout", "LeaderWorkerSet")
    for server in plan.triton_servers:
        if not any((kind, server.kube_name) in names for kind in workload):
            problems.append(f"Triton server {server.name}: no workload object rendered")
    for model in vllm_models(plan):
        if not any((kind, model.name) in names for kind in workload):
            problems.append(f"vLLM model {model.name}: no workload object rendered")
    if ("Namespace", plan.namespace) not in names:
        problems.append(f"no Namespace {plan.namespace}")
    return problems


def deploy_problems(plan: FleetPlan, deploy: DeployPlan) -> list[str]:
    """Every applied object, pod identity association, role and node group once, and within AWS's limits."""
    problems: list[str] = []
    objects = [o.name for o in deploy.cluster_objects]
    objects += [o.name for w in (*deploy.triton_servers, *deploy.vllm_models) for o in w.manifests]
    objects += [m.hf_secret.name for m in deploy.vllm_models if m.hf_secret]
    problems += [f"object {n} applied twice" for n in sorted({n for n in objects if objects.count(n) > 1})]
    identities = [i for w in deploy.triton_servers for i in (w.identity,)]
    identities += [i for m in deploy.vllm_models for i in (m.identity, m.stage_identity) if i is not None]
    accounts = [(i.namespace, i.service_account) for i in identities]
    problems += [f"service account {a} has two pod identities" for a in sorted({a for a in accounts if accounts.count(a) > 1})]
    roles = [i.name for i in identities]
    problems += [f"role {r}-pod twice" for r in sorted({r for r in roles if roles.count(r) > 1})]
    problems += [f"role {r}-pod: {len(r) + 4 + AUTONAME_SUFFIX} characters" for r in roles
                 if len(r) + len("-pod") + AUTONAME_SUFFIX > IAM_ROLE_MAX]
    groups = [g for g in (*deploy.node_groups, *((deploy.system_node_group,) if deploy.system_node_group else ()))]
    group_names = [g.name for g in groups]
    problems += [f"node group {g} twice" for g in sorted({g for g in group_names if group_names.count(g) > 1})]
    problems += [f"node group {g.name_prefix}: {len(g.name_prefix) + NODE_GROUP_SUFFIX} characters" for g in groups
                 if len(g.name_prefix) + NODE_GROUP_SUFFIX > NODE_GROUP_MAX]
    if {s.name for s in plan.triton_servers} != {t.name for t in deploy.triton_servers}:
        problems.append("a Triton server is missing from the deploy plan")
    if {m.name for m in vllm_models(plan)} != {v.name for v in deploy.vllm_models}:
        problems.append("a vLLM model is missing from the deploy plan")
    return problems
