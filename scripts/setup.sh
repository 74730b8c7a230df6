#!/usr/bin/env bash
# Create .venv and install modelfleet with everything the tests and the offline preview need.
# Idempotent; needs only Python 3.11+ and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[pulumi,serve,aws,test]'
.venv/bin/python examples/generate_artifacts.py >/dev/null  # small real ONNX models for `modelfleet serve`
