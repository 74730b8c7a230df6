"""The bad-input corpus: every case names the file, the line and the path of the problem."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from modelfleet.errors import SpecError
from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.spec.environment import parse_environment
from modelfleet.spec.load import parse_fleet_text
from modelfleet.spec.yaml_source import parse_yaml

FAMILIES = load_instance_catalogue().families()  # a stack may name only families the price table prices

BASE = textwrap.dedent("""\
    models:
      - name: classifier
        type: vision
        framework: onnx
        artifact: s3://models-bucket/classifier
        size: {params: 25M, dtype: fp32}
        inputs:
          - {name: x, dtype: fp32, dims: [3, 224, 224]}
        outputs:
          - {name: y, dtype: fp32, dims: [1000]}
        sla:
          p99_latency_ms: 100
          peak_rps: 200
      - name: chat
        type: llm
        artifact: meta-llama/Llama-3.1-8B-Instruct
        size: {dtype: bf16}
        architecture: llama-3.1-8b
        sla:
          max_context_tokens: 8192
          peak_concurrent_sequences: 16
          p99_ttft_ms: 2000
    """)


def edit(old: str, new: str, count: int = 1) -> str:
    assert old in BASE, old
    return BASE.replace(old, new, count)


# (id, document, expected line, expected path, a word the message or fix must contain)
CASES = [
    ("unknown-key", edit("      peak_rps: 200", "      peak_rps: 200\n      p99_latncy_ms: 3"), 14,
     "models[0].sla.p99_latncy_ms", "p99_latency_ms"),
    ("duplicate-key", edit("      peak_rps: 200", "      peak_rps: 200\n      peak_rps: 300"), 14,
     "models[0].sla.peak_rps", "duplicate key"),
    ("duplicate-name", edit("  - name: chat", "  - name: classifier"), 14, "models[1].name", "duplicate model name"),
    ("bad-name", edit("name: classifier", "name: Classifier_1"), 2, "models[0].name", "DNS-1123"),
    ("bad-param-unit", edit("params: 25M", "params: 25 zillion"), 6, "models[0].size.params", "8B"),
    ("negative-params", edit("params: 25M", "params: -5"), 6, "models[0].size.params", "positive"),
    ("bad-dtype", edit("{params: 25M, dtype: fp32}", "{params: 25M, dtype: float99}"), 6, "models[0].size.dtype",
     "fp32"),
    ("params-without-dtype", edit("{params: 25M, dtype: fp32}", "{params: 25M}"), 6, "models[0].size", "dtype"),
    ("params-and-memory", edit("{params: 25M, dtype: fp32}", "{params: 25M, dtype: fp32, memory_gib: 1}"), 6,
     "models[0].size", "not both"),
    ("bad-type", edit("type: vision", "type: visionn"), 3, "models[0].type", "vision"),
    ("bad-framework", edit("framework: onnx", "framework: caffe"), 4, "models[0].framework", "onnx"),
    ("artifact-not-s3", edit("artifact: s3://models-bucket/classifier", "artifact: /local/path"), 5,
     "models[0].artifact", "s3://"),
    ("missing-sla", edit("    sla:\n      p99_latency_ms: 100\n      peak_rps: 200\n", ""), 2, "models[0].sla",
     "required"),
    ("latency-string", edit("p99_latency_ms: 100", "p99_latency_ms: fast"), 12, "models[0].sla.p99_latency_ms",
     "number"),
    ("latency-negative", edit("p99_latency_ms: 100", "p99_latency_ms: -1"), 12, "models[0].sla.p99_latency_ms",
     "at least 1"),
    ("availability-100", edit("peak_rps: 200", "peak_rps: 200\n      availability: 100"), 14,
     "models[0].sla.availability", "less than 100"),
    ("dims-zero", edit("dims: [1000]", "dims: [0]"), 10, "models[0].outputs[0].dims", "-1"),
    ("dims-not-list", edit("dims: [1000]", "dims: many"), 10, "models[0].outputs[0].dims", "expected a list"),
    ("no-inputs", edit("    inputs:\n      - {name: x, dtype: fp32, dims: [3, 224, 224]}\n", "    inputs: []\n"), 7,
     "models[0].inputs", "at least 1"),
    ("tensor-name-clash", edit("{name: y, dtype", "{name: x, dtype"), 2, "models[0]", "unique"),
    ("cache-contradiction", edit("    sla:\n      p99", "    deterministic: false\n    overrides: {response_cache: true}\n    sla:\n      p99"),
     12, "models[0].overrides.response_cache", "contradicts"),
    ("classic-on-vllm", edit("framework: onnx", "framework: onnx\n    serving: vllm"), 5, "models[0].serving", "triton"),
    # LLM engines refused with the reason (docs/triton-features.md, "LLMs on Triton"), located at serving
    ("llm-on-triton", edit("    architecture: llama-3.1-8b", "    serving: triton\n    architecture: llama-3.1-8b"), 18,
     "models[1].serving", "nv_inference_pending_request_count stays at 0"),
    ("llm-on-triton-trtllm", edit("    architecture: llama-3.1-8b", "    serving: triton-trtllm\n    architecture: llama-3.1-8b"),
     18, "models[1].serving", "trtllm-build"),
    ("unknown-preset", edit("architecture: llama-3.1-8b", "architecture: llama-9"), 18, "models[1].architecture",
     "llama-3.1-8b"),
    ("bad-hf-id", edit("artifact: meta-llama/Llama-3.1-8B-Instruct", "artifact: not a repo"), 16,
     "models[1].artifact", "Hugging Face"),
    ("both-load-figures", edit("peak_concurrent_sequences: 16", "peak_concurrent_sequences: 16\n      peak_output_tokens_per_s: 900"),
     19, "models[1].sla", "exactly one"),
    ("context-over-model-limit", edit("max_context_tokens: 8192", "max_context_tokens: 200000"), 20, "models[1].sla.max_context_tokens",
     "max_position_embeddings"),
    ("tp-not-dividing-heads", edit("artifact: meta-llama/Llama-3.1-8B-Instruct\n    size: {dtype: bf16}\n    architecture: llama-3.1-8b",
                                   "artifact: Qwen/Qwen2.5-7B-Instruct\n    size: {dtype: bf16}\n    architecture: qwen2.5-7b\n"
                                   "    overrides: {tensor_parallel_size: 8}"),
     19, "models[1].overrides.tensor_parallel_size", "28 attention heads"),
    ("preset-typo-keeps-the-artifacts-size", edit("architecture: llama-3.1-8b", "architecture: llama-3-70b"), 18,
     "models[1].architecture", "did you mean `llama-3.1-8b`"),
    ("preset-contradicts-artifact", edit("architecture: llama-3.1-8b", "architecture: llama-3.1-70b"), 18,
     "models[1].architecture", "use architecture: llama-3.1-8b"),
    ("preset-contradicts-params", edit("size: {dtype: bf16}", "size: {params: 70B, dtype: bf16}"), 17,
     "models[1].size.params", "contradicts preset llama-3.1-8b"),
    ("architecture-missing", edit("    architecture: llama-3.1-8b\n", ""), 14, "models[1].architecture",
     "{config: models/<name>/config.json}"),
    ("config-missing", edit("architecture: llama-3.1-8b", "architecture: {config: models/nope/config.json}"), 18,
     "models[1].architecture.config", "cannot read models/nope/config.json"),
    ("config-leaves-the-project", edit("architecture: llama-3.1-8b", "architecture: {config: ../config.json}"), 18,
     "models[1].architecture.config", "leaves the directory"),
    ("three-load-figures", edit("peak_concurrent_sequences: 16", "peak_requests_per_s: 3\n      peak_output_tokens_per_s: 900"),
     19, "models[1].sla", "peak_requests_per_s"),
    ("shape-over-context", edit("max_context_tokens: 8192", "max_context_tokens: 8192\n      avg_input_tokens: 8000\n"
                                "      avg_output_tokens: 500"), 21, "models[1].sla.avg_input_tokens", "exceed"),
    ("tpot-too-high", edit("p99_ttft_ms: 2000", "p99_ttft_ms: 2000\n      p99_tpot_ms: 20000"), 23,
     "models[1].sla.p99_tpot_ms", "10,000"),
    ("extra-arg-owned", edit("architecture: llama-3.1-8b", "architecture: llama-3.1-8b\n    overrides: {extra_args: "
                             "[--max-num-seqs, '8']}"), 19, "models[1].overrides.extra_args",
     "set overrides.max_num_seqs"),
    ("lora-from-s3", edit("architecture: llama-3.1-8b", "architecture: llama-3.1-8b\n    lora: {adapters: [{name: a, "
                          "artifact: 's3://b/lora'}]}"), 19, "models[1].lora.adapters[0].artifact", "Hugging Face"),
    ("lora-rank", edit("architecture: llama-3.1-8b", "architecture: llama-3.1-8b\n    lora: {adapters: [{name: a, "
                       "artifact: acme/a}], max_rank: 24}"), 19, "models[1].lora.max_rank", "16"),
    ("bad-gqa", edit("architecture: llama-3.1-8b", "architecture: {layers: 4, attention_heads: 10, kv_heads: 4, head_dim: 64}"),
     18, "models[1].architecture", "multiple of kv_heads"),
    ("norway-bool", edit("      peak_concurrent_sequences: 16", "      peak_concurrent_sequences: no"), 21,
     "models[1].sla.peak_concurrent_sequences", "whole number"),
    ("yaml-syntax", edit("    type: vision", "    type: [vision"), 4, "", "line 3"),
    ("merge-key", "models:\n  - <<: [5]\n    name: x\n", 2, "models[0]", "merge key (<<) takes a mapping"),
    ("empty-file", "", 1, "", "empty"),
    ("root-is-list", "- a\n- b\n", 1, "", "expected a mapping"),
    ("unknown-environment", edit("      peak_rps: 200", "      peak_rps: 200\n    environments:\n      prdo: {enabled: false}"),
     15, "models[0].environments.prdo", "prod"),
    ("bad-environment-patch", edit("      peak_rps: 200", "      peak_rps: 200\n    environments:\n      dev:\n        sla: {peak_rps: -3}"),
     16, "models[0].environments.dev.sla.peak_rps", "at least 0.001"),
    # --- numbers: finite, and never beyond a documented bound (the planner overflowed or spun on these)
    ("peak-rps-inf", edit("peak_rps: 200", "peak_rps: .inf"), 13, "models[0].sla.peak_rps", "finite"),
    ("peak-rps-nan", edit("peak_rps: 200", "peak_rps: .nan"), 13, "models[0].sla.peak_rps", "finite"),
    ("peak-rps-1e308", edit("peak_rps: 200", "peak_rps: 1.0e308"), 13, "models[0].sla.peak_rps",
     "at most 10,000,000"),
    ("peak-rps-44-digits", edit("peak_rps: 200", "peak_rps: " + "1" * 44), 13, "models[0].sla.peak_rps",
     "at most 10,000,000"),
    ("peak-rps-trillion", edit("peak_rps: 200", "peak_rps: 1000000000000"), 13, "models[0].sla.peak_rps",
     "split a larger load"),
    ("peak-rps-overflows-yaml", edit("peak_rps: 200", "peak_rps: 1.0e+400"), 13, "models[0].sla.peak_rps",
     "too large"),
    ("peak-rps-5000-digits", edit("peak_rps: 200", "peak_rps: " + "9" * 5000), 13, "models[0].sla.peak_rps",
     "5,000 digits"),
    ("rps-per-instance-inf", edit("  - name: chat", "    profile: {rps_per_instance: .inf}\n  - name: chat"), 14,
     "models[0].profile.rps_per_instance", "finite"),
    ("output-tokens-inf", edit("peak_concurrent_sequences: 16", "peak_output_tokens_per_s: .inf"), 21,
     "models[1].sla.peak_output_tokens_per_s", "finite"),
    ("output-tokens-too-many-sequences", edit("peak_concurrent_sequences: 16", "peak_output_tokens_per_s: 90000000"),
     21, "models[1].sla.peak_output_tokens_per_s", "1,000,000"),
    ("params-999999T", edit("params: 25M", "params: 999999T"), 6, "models[0].size.params", "100T"),
    ("memory-too-large", edit("{params: 25M, dtype: fp32}", "{memory_gib: 5000}"), 6, "models[0].size.memory_gib",
     "at most 4,096"),
    ("context-too-large", edit("max_context_tokens: 8192", "max_context_tokens: 99999999"), 20,
     "models[1].sla.max_context_tokens", "at most 2,097,152"),
    ("concurrency-too-large", edit("peak_concurrent_sequences: 16", "peak_concurrent_sequences: 2000000"), 21,
     "models[1].sla.peak_concurrent_sequences", "at most 1,000,000"),
    ("dim-too-large", edit("dims: [1000]", "dims: [3000000000]"), 10, "models[0].outputs[0].dims[0]",
     "2,147,483,647"),
    ("dim-below-minus-one", edit("dims: [1000]", "dims: [-5]"), 10, "models[0].outputs[0].dims[0]", "at least -1"),
    ("batch-too-large", edit("    sla:\n      p99", "    overrides: {max_batch_size: 100000}\n    sla:\n      p99"),
     11, "models[0].overrides.max_batch_size", "at most 4,096"),
    ("queue-timeout-too-large", edit("    sla:\n      p99", "    overrides: {queue_timeout_us: 1000000000000}\n"
                                                            "    sla:\n      p99"),
     11, "models[0].overrides.queue_timeout_us", "at most 600,000,000"),
    ("availability-zero", edit("peak_rps: 200", "peak_rps: 200\n      availability: 0"), 14,
     "models[0].sla.availability", "at least 90"),
    ("latency-too-large", edit("p99_latency_ms: 100", "p99_latency_ms: 1000000"), 12, "models[0].sla.p99_latency_ms",
     "batch job"),
    ("ttft-inf", edit("p99_ttft_ms: 2000", "p99_ttft_ms: .inf"), 22, "models[1].sla.p99_ttft_ms", "finite"),
    # --- the smallest values too: below these a division in the planner rounds to zero or overflows
    ("tiny-throughput", edit("  - name: chat", "    profile: {rps_per_instance: 5.0e-324}\n  - name: chat"), 14,
     "models[0].profile.rps_per_instance", "at least 0.001"),
    ("tiny-compute", edit("  - name: chat", "    profile: {compute_ms: 1.0e-4}\n  - name: chat"), 14,
     "models[0].profile.compute_ms", "kernel launches"),
    ("tiny-decode-rate", edit("      p99_ttft_ms: 2000", "      p99_ttft_ms: 2000\n    profile: "
                                                         "{output_tokens_per_s_per_sequence: 5.0e-324}"), 23,
     "models[1].profile.output_tokens_per_s_per_sequence", "at least 0.1"),
    ("tiny-latency", edit("p99_latency_ms: 100", "p99_latency_ms: 1.0e-300"), 12, "models[0].sla.p99_latency_ms",
     "triton's own scheduling"),
    ("layers-too-many", edit("architecture: llama-3.1-8b", "architecture: {layers: 5000, attention_heads: 8, "
                                                           "kv_heads: 8, head_dim: 64}"),
     18, "models[1].architecture.layers", "at most 1,024"),
    ("version-zero", edit("framework: onnx", "framework: onnx\n    versions: [0]"), 5, "models[0].versions[0]",
     "greater than 0"),
    # --- the YAML layer: a scalar that cannot be what it is tagged is located, not a traceback
    ("bang-int-abc", edit("peak_rps: 200", "peak_rps: !!int abc"), 13, "models[0].sla.peak_rps", "not a whole number"),
    ("bang-float-abc", edit("peak_rps: 200", "peak_rps: !!float abc"), 13, "models[0].sla.peak_rps", "not a number"),
    ("sexagesimal-stays-text", edit("p99_latency_ms: 100", "p99_latency_ms: 1:30"), 12, "models[0].sla.p99_latency_ms",
     "expected a number"),
    # --- strict types: YAML says what a scalar is; nothing is silently converted
    ("peak-rps-true", edit("peak_rps: 200", "peak_rps: true"), 13, "models[0].sla.peak_rps", "not numbers"),
    ("peak-rps-quoted", edit("peak_rps: 200", 'peak_rps: "100"'), 13, "models[0].sla.peak_rps", "without quotes"),
    ("deterministic-no", edit("framework: onnx", "framework: onnx\n    deterministic: no"), 5,
     "models[0].deterministic", "yaml 1.2"),
    ("replicas-float", edit("    sla:\n      p99", "    overrides: {replicas: 2.0}\n    sla:\n      p99"), 11,
     "models[0].overrides.replicas", "without a decimal point"),
    ("team-number", edit("framework: onnx", "framework: onnx\n    team: 42"), 5, "models[0].team", "quote it"),
    ("pool-not-a-label", edit("framework: onnx", "framework: onnx\n    pool: Fraud Team"), 5, "models[0].pool",
     "DNS-1123"),
    ("name-number", edit("name: classifier", "name: 123"), 2, "models[0].name", "expected text"),
    # --- messages in our words: no union noise, no pydantic class names, per-kind did-you-mean
    ("architecture-field-wrong", edit("architecture: llama-3.1-8b", "architecture: {layers: x, attention_heads: 8, "
                                                                    "kv_heads: 8, head_dim: 64}"),
     18, "models[1].architecture.layers", "whole number"),
    ("architecture-a-list", edit("architecture: llama-3.1-8b", "architecture: [1, 2]"), 18, "models[1].architecture",
     "preset name, {config: path of the model's config.json}, or a mapping"),
    ("preset-did-you-mean", edit("architecture: llama-3.1-8b", "architecture: llama-3.1-8"), 18,
     "models[1].architecture", "did you mean `llama-3.1-8b`"),
    ("model-not-a-mapping", "models: [3]\n", 1, "models[0]", "expected a mapping"),
    ("models-not-a-list", "models: 3\n", 1, "models", "expected a list"),
    ("inputs-on-an-llm", edit("    architecture: llama", "    inputs: []\n    architecture: llama"), 18,
     "models[1].inputs", "belongs to classic (triton) models"),
    ("peak-rps-on-an-llm", edit("      p99_ttft_ms: 2000", "      p99_ttft_ms: 2000\n      peak_rps: 5"), 23,
     "models[1].sla.peak_rps", "belongs to a classic model's sla"),
    ("llm-key-typo", edit("max_context_tokens: 8192", "max_context_token: 8192"), 20, "models[1].sla.max_context_token",
     "did you mean `max_context_tokens`"),
    ("triton-artifact-not-s3", edit("artifact: s3://models-bucket/classifier", "artifact: org/model"), 5,
     "models[0].artifact", "version folders"),
    ("s3-bucket-too-short", edit("artifact: s3://models-bucket/classifier", "artifact: s3://b/x"), 5,
     "models[0].artifact", "3 to 63"),
    ("s3-bucket-uppercase", edit("artifact: s3://models-bucket/classifier", "artifact: s3://My_Bucket/x"), 5,
     "models[0].artifact", "lowercase letters"),
    ("type-did-you-mean", edit("type: vision", "type: Vision"), 3, "models[0].type", "did you mean `vision`"),
    ("framework-did-you-mean", edit("framework: onnx", "framework: onx"), 4, "models[0].framework",
     "did you mean `onnx`"),
]

PYDANTIC_WORDING = ("Input should", "instance of", "valid dictionary", "valid tuple", "Value error", "FleetSpec",
                    "ModelSpec", "PresetName")


@pytest.mark.parametrize("case_id,text,line,path,word", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_located(case_id, text, line, path, word):
    with pytest.raises(SpecError) as caught:
        parse_fleet_text(text, "models.yaml", known_environments=("dev", "staging", "prod"))
    matching = [i for i in caught.value.issues if i.path == path]
    assert matching, f"no issue at {path!r}: {caught.value}"
    issue = matching[0]
    assert issue.file == "models.yaml"
    assert issue.line == line, str(issue)
    assert word.lower() in (issue.message + " " + issue.fix).lower(), str(issue)
    assert str(issue).startswith(f"models.yaml:{line}:")
    for each in caught.value.issues:
        assert not any(w in str(each) for w in PYDANTIC_WORDING), str(each)
        assert not each.path.endswith(".str"), str(each)
    assert len(matching) == 1, "one problem, said once"


def test_every_problem_is_reported_at_once():
    text = edit("p99_latency_ms: 100", "p99_latency_ms: -1").replace("name: chat", "name: Chat")
    text = text.replace("      peak_rps: 200", "      peak_rps: 200\n      peak_rps: 1")
    with pytest.raises(SpecError) as caught:
        parse_fleet_text(text)
    paths = {i.path for i in caught.value.issues}
    assert {"models[0].sla.p99_latency_ms", "models[1].name", "models[0].sla.peak_rps"} <= paths


def test_stack_file_errors_name_the_config_key():
    with pytest.raises(SpecError) as caught:
        parse_environment("dev", {"aws:region": "mars-1", "modelfleet:capacityType": "cheap",
                                  "modelfleet:replica": {}}, families=FAMILIES)
    paths = {i.path for i in caught.value.issues}
    assert {"config.aws:region", "config.modelfleet:capacityType", "config.modelfleet:replica"} <= paths


def test_cli_exit_code_2_no_traceback_nothing_written(tmp_path: Path):
    bad = tmp_path / "models.yaml"
    bad.write_text(edit("peak_rps: 200", "peak_rps: lots"))
    out = tmp_path / "out"
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(root), "render", "--stack", "prod",
                             "--models", str(bad), "--out", str(out)], capture_output=True, text=True, cwd=root)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"{bad}:13:" in result.stderr and "models[0].sla.peak_rps" in result.stderr
    assert not out.exists()


# ---------------------------------------------------------------------------------------------- stack files
STACK = textwrap.dedent("""\
    config:
      aws:region: us-east-1
      modelfleet:capacityType: spot
      modelfleet:instanceFamilies: [g4dn, g5, g6, g6e]
      modelfleet:replicas:
        singleReplica: true
      modelfleet:policies:
        allowedFamilies: [g5, g6]
        forbid:
          - families: [p4d, p5]
            capacityType: on-demand
    """)


def stack_edit(old: str, new: str) -> str:
    assert old in STACK, old
    return STACK.replace(old, new, 1)


# (id, stack file, expected line, expected path, a word the message or fix must contain)
STACK_CASES = [
    ("family-typo", stack_edit("[g4dn, g5, g6, g6e]", "[g6ee, p5]"), 4, "config.modelfleet:instanceFamilies[0]",
     "did you mean `g6e`"),
    ("allowed-family-typo", stack_edit("[g5, g6]", "[g5, g7]"), 8, "config.modelfleet:policies.allowedFamilies[1]",
     "unknown instance family 'g7'"),
    ("forbidden-family-typo", stack_edit("[p4d, p5]", "[p4dd, p5]"), 10,
     "config.modelfleet:policies.forbid[0].families[0]", "did you mean `p4d`"),
    ("region-made-up", stack_edit("us-east-1", "eu-nowhere-9"), 2, "config.aws:region", "not an AWS region"),
    ("region-typo", stack_edit("us-east-1", "us-east1"), 2, "config.aws:region", "did you mean `us-east-1`"),
    ("unknown-setting", stack_edit("modelfleet:capacityType", "modelfleet:capacityTpye"), 3,
     "config.modelfleet:capacityTpye", "did you mean `modelfleet:capacityType`"),
    ("unknown-nested-key", stack_edit("singleReplica", "singleReplca"), 6, "config.modelfleet:replicas.singleReplca",
     "did you mean `singleReplica`"),
    ("key-without-namespace", stack_edit("modelfleet:capacityType", "capacityType"), 3, "config.capacityType",
     "write `modelfleet:capacityType`"),
    ("namespace-typo", stack_edit("modelfleet:capacityType", "modelfleat:capacityType"), 3,
     "config.modelfleat:capacityType", "write `modelfleet:capacityType`"),
    ("region-under-modelfleet", stack_edit("modelfleet:capacityType: spot", "modelfleet:region: eu-west-1"), 3,
     "config.modelfleet:region", "aws:region"),
    ("quoted-boolean", stack_edit("singleReplica: true", 'singleReplica: "yes"'), 6,
     "config.modelfleet:replicas.singleReplica", "true or false"),
    ("budget-inf", stack_edit("modelfleet:capacityType: spot", "modelfleet:budget: {monthlyUsd: .inf}"), 3,
     "config.modelfleet:budget.monthlyUsd", "finite"),
    ("zones-float", stack_edit("modelfleet:capacityType: spot", "modelfleet:availabilityZones: 2.0"), 3,
     "config.modelfleet:availabilityZones", "without a decimal point"),
    ("scale-factor-too-large", stack_edit("singleReplica: true", "maxScaleFactor: 1000"), 6,
     "config.modelfleet:replicas.maxScaleFactor", "at most 10"),
    ("graviton-system-nodes", stack_edit("modelfleet:capacityType: spot",
                                         "modelfleet:cluster: {systemInstanceType: m7g.large}"), 3,
     "config.modelfleet:cluster.systemInstanceType", "arm64"),
    ("tracing-rate-not-one-in-n", stack_edit("modelfleet:capacityType: spot", "modelfleet:triton: {tracing: "
                                             "{collectorUrl: 'http://otel:4318/v1/traces', samplingRate: 0.3}}"), 3,
     "config.modelfleet:triton.tracing.samplingRate", "one in 3"),
    ("tracing-without-collector", stack_edit("modelfleet:capacityType: spot",
                                             "modelfleet:triton: {tracing: {samplingRate: 0.01}}"), 3,
     "config.modelfleet:triton.tracing.collectorUrl", "collector"),
]


@pytest.mark.parametrize("case_id,text,line,path,word", STACK_CASES, ids=[c[0] for c in STACK_CASES])
def test_bad_stack_file_is_located(case_id, text, line, path, word):
    doc = parse_yaml(text, "stacks/Pulumi.dev.yaml")
    with pytest.raises(SpecError) as caught:
        parse_environment("dev", doc.data["config"], doc, families=FAMILIES)
    matching = [i for i in caught.value.issues if i.path == path]
    assert len(matching) == 1, f"no single issue at {path!r}: {caught.value}"
    assert str(matching[0]).startswith(f"stacks/Pulumi.dev.yaml:{line}:"), str(matching[0])
    assert word.lower() in str(matching[0]).lower(), str(matching[0])
    assert not any(w in str(caught.value) for w in PYDANTIC_WORDING), str(caught.value)


def test_a_real_region_without_prices_is_accepted():
    """Costs then say "unknown" (cost.py); a region must not be rejected just because prices are missing."""
    doc = parse_yaml(stack_edit("us-east-1", "ap-southeast-7"), "stacks/Pulumi.dev.yaml")
    assert parse_environment("dev", doc.data["config"], doc, families=FAMILIES).region == "ap-southeast-7"


def test_the_program_reads_pulumis_strings_back_as_their_types():
    """Pulumi hands a program top-level config values as strings; the stack file had them typed."""
    config = {"aws:region": "us-east-1", "modelfleet:availabilityZones": "2", "modelfleet:protect": "true",
              "modelfleet:kubernetesVersion": "1.33", "modelfleet:replicas": {"singleReplica": True},
              "modelfleet:hfToken": "hf_secret", "kubernetes:context": "ignored"}
    env = parse_environment("dev", config, families=FAMILIES)
    assert (env.availability_zones, env.protect, env.kubernetes_version) == (2, True, "1.33")
    with pytest.raises(SpecError, match="expected true or false"):
        parse_environment("dev", {**config, "modelfleet:protect": "yes"}, families=FAMILIES)


def test_families_are_checked_against_the_price_table_in_use(tmp_path: Path):
    """A table of one's own (--prices) may add a family; the stack may then name it, and only then."""
    from modelfleet.project import Project

    root = Path(__file__).resolve().parent.parent
    table = yaml.safe_load((root / "modelfleet" / "data" / "instances.yaml").read_text())
    table["instances"]["x9.2xlarge"] = {**table["instances"]["g6e.xlarge"], "family": "x9"}
    prices = tmp_path / "prices.yaml"
    prices.write_text(yaml.safe_dump(table))
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.dev.yaml").write_text(stack_edit("[g4dn, g5, g6, g6e]", "[g6e, x9]"))
    assert Project(root=str(tmp_path), prices_file=str(prices)).environment("dev").instance_families == ("g6e", "x9")
    with pytest.raises(SpecError, match="unknown instance family 'x9'"):
        Project(root=str(tmp_path)).environment("dev")
