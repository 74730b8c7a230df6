"""The external judges the hardening tests run, and what they are run on.

A judge that is not installed skips its test on a developer's machine, but fails it in CI (``CI`` set):
a green CI must mean every judge ran.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import jsonschema
import pytest
import yaml

SCHEMAS = Path(__file__).resolve().parent / "crd_schemas"
CRDS = Path(__file__).resolve().parent / "crds"  # real CRDs, unchanged (crds/README.md)
# The CRDs we render: a vendored schema subset (JSON, with the upstream release it was written from), or the
# real CRD itself (YAML: its openAPIV3Schema, made strict by strict_schema).
CRD_SCHEMAS = {("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "leaderworkerset.x-k8s.io_v1.json",
               ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com_v1_servicemonitor.json",
               # the real CRD, unchanged (tests/observability/crds/README.md)
               ("monitoring.coreos.com/v1", "PrometheusRule"):
                   "../../observability/crds/monitoring.coreos.com_prometheusrules.yaml",
               ("argoproj.io/v1alpha1", "Rollout"): "argoproj.io_rollout-crd.yaml",
               ("argoproj.io/v1alpha1", "AnalysisTemplate"): "argoproj.io_analysis-template-crd.yaml",
               ("gateway.networking.k8s.io/v1", "HTTPRoute"): "gateway.networking.k8s.io_httproutes.yaml",
               ("karpenter.sh/v1", "NodePool"): "karpenter.sh_nodepools.yaml",
               ("karpenter.k8s.aws/v1", "EC2NodeClass"): "karpenter.k8s.aws_ec2nodeclasses.yaml",
               ("keda.sh/v1alpha1", "ScaledObject"): "keda.sh_scaledobjects.yaml"}
CHECKOV_TIMEOUT_S = 600
# checkov pins packaging<24, which the Pulumi SDK the program needs (>=3.224: packaging>=26) excludes, so
# scripts/setup.sh gives it a venv of its own (as .venv-vllm and .venv-calibrate have theirs).
CHECKOV_VENV = Path(__file__).resolve().parents[2] / ".venv-checkov" / "bin"


def missing(what: str) -> None:
    """Skip on a developer's machine; fail in CI, where every judge must run."""
    message = f"{what} is not installed (bash scripts/setup.sh installs every judge)"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: a judge must not be skipped in CI")
    pytest.skip(message)


def require_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(name)
        raise  # unreachable: missing() skips or fails


def require_executable(name: str, *places: Path) -> str:
    """``name`` beside this Python, in ``places``, or on PATH."""
    found = (shutil.which(name, path=os.pathsep.join(map(str, (Path(sys.executable).parent, *places))))
             or shutil.which(name))
    if found is None:
        missing(name)
    return str(found)


def kubernetes_objects(files: dict[str, bytes]) -> list[dict[str, Any]]:
    return [o for name, text in sorted(files.items()) if name.startswith("kubernetes/")
            for o in yaml.safe_load_all(text) if o]


def lws_pod_templates(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """A LeaderWorkerSet's leader and worker templates as v1 PodTemplate objects, so the built-in schemas
    and checkov judge the pods of a multi-node model like any Deployment's. The template's own labels and
    annotations (its checkov skips) become the PodTemplate's, where checkov reads them."""
    meta, lws = obj["metadata"], obj["spec"]["leaderWorkerTemplate"]
    wrapped = []
    for where in ("leaderTemplate", "workerTemplate"):
        if where not in lws:
            continue
        template = lws[where]
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        wrapped.append({"apiVersion": "v1", "kind": "PodTemplate",
                        "metadata": {"name": f"{meta['name']}-{where.removesuffix('Template')}",
                                     "namespace": meta.get("namespace", "default"), "annotations": annotations,
                                     "labels": (template.get("metadata") or {}).get("labels") or {}},
                        "template": template})
    return wrapped


def strict_schema(schema: Any) -> Any:
    """An openAPIV3Schema as JSON Schema that rejects unknown fields, as `kubectl apply --validate=strict`
    does (the API server would silently prune them): every object schema with properties and no
    ``additionalProperties`` or ``x-kubernetes-preserve-unknown-fields`` gets ``additionalProperties: false``.
    The ``x-kubernetes-*`` keys stay (JSON Schema ignores them); CEL rules (x-kubernetes-validations) are not
    evaluated."""
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict_schema(value) for key, value in schema.items()}
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def real_crd_schema(api_version: str, file: str) -> dict[str, Any]:
    """The openAPIV3Schema of ``api_version``'s version in a real CRD file (crds/), strict."""
    crd = yaml.safe_load((CRDS / file).read_text())
    version = api_version.split("/")[-1]
    found = next(v for v in crd["spec"]["versions"] if v["name"] == version)
    return strict_schema(found["schema"]["openAPIV3Schema"])


@cache
def _crd_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    file = CRD_SCHEMAS[(api_version, kind)]
    if file.endswith(".yaml"):  # a whole CRD, unchanged: its served version's schema, strict; not meta-checked
        # (its patterns are Go's, e.g. ^(?i)...)
        return jsonschema.Draft7Validator(real_crd_schema(api_version, file))
    schema = json.loads((SCHEMAS / file).read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def rollout_pod_template(obj: dict[str, Any]) -> dict[str, Any]:
    """A Rollout's pod template as a v1 PodTemplate (kubernetes-validate and checkov know no Rollout)."""
    meta, template = obj["metadata"], obj["spec"]["template"]
    return {"apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": f"{meta['name']}-rollout", "namespace": meta.get("namespace", "default"),
                         "annotations": template["metadata"].get("annotations") or {},
                         "labels": template["metadata"].get("labels") or {}},
            "template": template}


def is_crd(obj: dict[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in CRD_SCHEMAS


def crd_errors(obj: dict[str, Any]) -> list[str]:
    """Every error of a CRD object against its vendored openAPIV3 schema subset."""
    validator = _crd_validator(obj["apiVersion"], obj["kind"])
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(obj)]


def run_checkov(directory: Path) -> dict[str, Any]:
    """checkov's Kubernetes checks on ``directory``, as its JSON report (one framework: one report).
    Not --quiet: quiet drops the passed and skipped checks, which the tests count."""
    checkov = require_executable("checkov", CHECKOV_VENV)
    run = subprocess.run([checkov, "-d", str(directory), "--framework", "kubernetes", "--skip-download",
                          "--output", "json"], capture_output=True, text=True, timeout=CHECKOV_TIMEOUT_S)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert isinstance(report, dict) and "results" in report and "summary" in report, (
        f"checkov produced no Kubernetes report: {run.stdout[:500]}")
    return report
