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
# The CRDs we render, with the upstream release each vendored schema subset was written from.
CRD_SCHEMAS = {("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "leaderworkerset.x-k8s.io_v1.json",
               ("monitoring.coreos.com/v1", "ServiceMonitor"): "monitoring.coreos.com_v1_servicemonitor.json",
               # the real CRD, unchanged (tests/observability/crds/README.md)
               ("monitoring.coreos.com/v1", "PrometheusRule"):
                   "../../observability/crds/monitoring.coreos.com_prometheusrules.yaml"}
CHECKOV_TIMEOUT_S = 600


def missing(what: str) -> None:
    """Skip on a developer's machine; fail in CI, where every judge must run."""
    message = f"{what} is not installed (pip install -e '.[test]')"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: a judge must not be skipped in CI")
    pytest.skip(message)


def require_module(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        missing(name)
        raise  # unreachable: missing() skips or fails


def require_executable(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent)) or shutil.which(name)
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


@cache
def _crd_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    path = SCHEMAS / CRD_SCHEMAS[(api_version, kind)]
    if path.suffix == ".yaml":  # a whole CRD: its served version's OpenAPI v3 schema, as Draft 7 reads it
        crd = yaml.safe_load(path.read_text())  # (not meta-checked: its patterns are Go's, e.g. ^(?i)...)
        version = api_version.rsplit("/", 1)[1]
        schema = next(v for v in crd["spec"]["versions"] if v["name"] == version)["schema"]["openAPIV3Schema"]
        return jsonschema.Draft7Validator(schema)
    schema = json.loads(path.read_text())
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def is_crd(obj: dict[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in CRD_SCHEMAS


def crd_errors(obj: dict[str, Any]) -> list[str]:
    """Every error of a CRD object against its vendored openAPIV3 schema subset."""
    validator = _crd_validator(obj["apiVersion"], obj["kind"])
    return [f"{'.'.join(map(str, e.absolute_path)) or '<root>'}: {e.message}" for e in validator.iter_errors(obj)]


def run_checkov(directory: Path) -> dict[str, Any]:
    """checkov's Kubernetes checks on ``directory``, as its JSON report (one framework: one report).
    Not --quiet: quiet drops the passed and skipped checks, which the tests count."""
    checkov = require_executable("checkov")
    run = subprocess.run([checkov, "-d", str(directory), "--framework", "kubernetes", "--skip-download",
                          "--output", "json"], capture_output=True, text=True, timeout=CHECKOV_TIMEOUT_S)
    assert run.returncode in (0, 1), run.stderr[-2000:]
    report = json.loads(run.stdout)
    assert isinstance(report, dict) and "results" in report and "summary" in report, (
        f"checkov produced no Kubernetes report: {run.stdout[:500]}")
    return report
