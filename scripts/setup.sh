#!/usr/bin/env bash
# Create .venv and install modelfleet with everything the tests and the offline preview need.
# Idempotent; needs only Python 3.11+ and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[pulumi,serve,aws,profile,dashboards,test]'
# checkov (a judge of the manifests) in a venv of its own: it pins packaging<24, the Pulumi SDK needs >=26
[ -x .venv-checkov/bin/python ] || "$PYTHON" -m venv .venv-checkov
.venv-checkov/bin/python -m pip install --quiet --disable-pip-version-check 'checkov>=3.2,<4'
.venv/bin/python examples/generate_artifacts.py >/dev/null  # small real ONNX models for `modelfleet serve`
# Prometheus and promtool (Debian's prometheus 2.42): the judges of the generated alert rules, dashboard
# queries and rollout analyses; shellcheck: actionlint checks the generated workflows' scripts with it; haproxy
# (Debian's 2.6.12, the release the caller proxy's image pins) runs the generated caller-counting configuration.
# Installed where missing and this is a Debian machine we may change (root); elsewhere the tests that need them
# say how.
missing=""
command -v promtool >/dev/null 2>&1 || missing="$missing prometheus"
command -v shellcheck >/dev/null 2>&1 || missing="$missing shellcheck"
command -v haproxy >/dev/null 2>&1 || missing="$missing haproxy"
if [ -n "$missing" ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        # shellcheck disable=SC2086  # one package name per word
        { apt-get install -y -q $missing || { apt-get update -q && apt-get install -y -q $missing; }; } >/dev/null
    else
        echo "note:$missing not found; install Debian's packages of that name for the observability, workflow and proxy tests" >&2
    fi
fi
