"""``overrides.extra_args`` may not set what the compiler writes, nor change which code, weights or files load,
in any spelling vLLM's parser accepts (modelfleet/spec/vllm_flags.py). The same generated spellings go through
vLLM's real parser in CI (tests/engines/test_vllm_args.py)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from modelfleet.errors import SpecError
from modelfleet.spec.llm_options import check_extra_args
from modelfleet.spec.load import parse_fleet_text
from modelfleet.spec.values import FieldProblem
from tests.spec.vllm_spellings import BENIGN, argument_lists

# What must be refused in every spelling: what the compiler writes, and what changes what loads (the table of
# vLLM's own flags names them by the argument they set; the lists are the checker's, asserted here by name so a
# flag dropped from them fails this test).
REFUSED = frozenset({
    "model", "served_model_name", "host", "port", "tensor_parallel_size", "pipeline_parallel_size", "data_parallel_size",
    "max_model_len", "max_num_seqs", "max_num_batched_tokens", "gpu_memory_utilization", "kv_cache_memory_bytes",
    "dtype", "quantization", "kv_cache_dtype", "enable_prefix_caching", "distributed_executor_backend", "load_format",
    "model_loader_extra_config", "enable_lora", "lora_modules", "max_lora_rank", "max_loras", "enable_expert_parallel",
    "revision", "tokenizer_revision", "tokenizer", "code_revision", "trust_remote_code", "hf_config_path", "config",
    "download_dir", "speculative_config", "spec_model", "tool_parser_plugin", "logits_processors", "worker_cls",
    "worker_extension_cls", "middleware", "log_config_file", "allowed_local_media_path", "hf_overrides",
    "kv_transfer_config", "default_mm_loras", "hf_token",
})


@settings(max_examples=600, deadline=None)
@given(argument_lists(REFUSED))
def test_every_spelling_of_a_refused_flag_is_refused(args):
    with pytest.raises(FieldProblem) as refused:
        check_extra_args(tuple(args))
    assert "extra_args[" in str(refused.value) and refused.value.fix


@settings(max_examples=100, deadline=None)
@given(argument_lists(frozenset({"chat_template"})))
def test_a_chat_template_is_refused_unless_inline(args):
    index = next(i for i, a in enumerate(args) if a.lower().replace("_", "-").startswith("--chat-t"))
    value = args[index].split("=", 1)[1] if "=" in args[index] else (args[index + 1:index + 2] or [""])[0]
    if "{{" in value or "{%" in value:
        return
    with pytest.raises(FieldProblem, match="chat template|compiler writes|sets vLLM"):
        check_extra_args(tuple(args))


@pytest.mark.parametrize("args", [tuple(t for group in BENIGN for t in group), ("--seed", "-1"), ("-O", "3")])
def test_flags_that_tune_serving_pass(args):
    check_extra_args(args)


@pytest.mark.parametrize(("args", "message"), [
    (("--max_model_len", "9"), "extra_args[0] '--max_model_len' sets vLLM's --max-model-len, which the compiler "
                               "writes (from sla.max_context_tokens)"),
    (("--seed", "0", "-tp=4"), "extra_args[2] '-tp=4' sets vLLM's --tensor-parallel-size"),
    (("--tokenizer", "other/repo"), "loads another repository's tokenizer, unpinned"),
    (("--trust-remote-code",), "runs the repository's code"),
    (("--speculative-config.model", "other/draft"), "loads another model"),
    (("--generation-config", "/models/x"), "reads a generation config folder"),
    (("--seed", "--"), "is not a flag vLLM should see here"),
])
def test_refusals_name_the_item_and_what_it_sets(args, message):
    with pytest.raises(FieldProblem, match=None) as refused:
        check_extra_args(args)
    assert message in str(refused.value)


def test_the_refusal_is_a_located_spec_error():
    text = """\
models:
  - name: chat
    type: llm
    artifact: meta-llama/Llama-3.1-8B-Instruct
    size: {dtype: bf16}
    architecture: llama-3.1-8b
    sla: {max_context_tokens: 8192, peak_concurrent_sequences: 8, p99_ttft_ms: 3000}
    overrides:
      extra_args: [--seed, "7", --max_num_seqs=512]
"""
    with pytest.raises(SpecError) as refused:
        parse_fleet_text(text)
    (issue,) = refused.value.issues
    assert (issue.line, issue.path) == (9, "models[0].overrides.extra_args")
    assert "extra_args[2] '--max_num_seqs=512' sets vLLM's --max-num-seqs" in issue.message
    assert issue.fix == "remove it from extra_args and set overrides.max_num_seqs"
