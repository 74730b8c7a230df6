"""The bad-input corpus: every case names the file, the line and the path of the problem."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from modelfleet.catalogue import parse_fleet_text
from modelfleet.errors import SpecError
from modelfleet.environment import parse_environment

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
     "greater than 0"),
    ("availability-100", edit("peak_rps: 200", "peak_rps: 200\n      availability: 100"), 14,
     "models[0].sla.availability", "less than 100"),
    ("dims-zero", edit("dims: [1000]", "dims: [0]"), 10, "models[0].outputs[0].dims", "-1"),
    ("dims-not-list", edit("dims: [1000]", "dims: many"), 10, "models[0].outputs[0].dims", "tuple"),
    ("no-inputs", edit("    inputs:\n      - {name: x, dtype: fp32, dims: [3, 224, 224]}\n", "    inputs: []\n"), 7,
     "models[0].inputs", "at least 1"),
    ("tensor-name-clash", edit("{name: y, dtype", "{name: x, dtype"), 2, "models[0]", "unique"),
    ("cache-contradiction", edit("    sla:\n      p99", "    deterministic: false\n    overrides: {response_cache: true}\n    sla:\n      p99"),
     12, "models[0].overrides.response_cache", "contradicts"),
    ("classic-on-vllm", edit("framework: onnx", "framework: onnx\n    serving: vllm"), 5, "models[0].serving", "triton"),
    ("unknown-preset", edit("architecture: llama-3.1-8b", "architecture: llama-9"), 18, "models[1].architecture",
     "llama-3.1-8b"),
    ("bad-hf-id", edit("artifact: meta-llama/Llama-3.1-8B-Instruct", "artifact: not a repo"), 16,
     "models[1].artifact", "Hugging Face"),
    ("both-load-figures", edit("peak_concurrent_sequences: 16", "peak_concurrent_sequences: 16\n      peak_output_tokens_per_s: 900"),
     19, "models[1].sla", "exactly one"),
    ("context-over-model-limit", edit("max_context_tokens: 8192", "max_context_tokens: 200000"), 20, "models[1].sla.max_context_tokens",
     "max_position_embeddings"),
    ("tp-not-dividing-heads", edit("architecture: llama-3.1-8b", "architecture: qwen2.5-7b\n    overrides: {tensor_parallel_size: 8}"),
     19, "models[1].overrides.tensor_parallel_size", "28 attention heads"),
    ("bad-gqa", edit("architecture: llama-3.1-8b", "architecture: {layers: 4, attention_heads: 10, kv_heads: 4, head_dim: 64}"),
     18, "models[1].architecture", "multiple of kv_heads"),
    ("norway-bool", edit("      peak_concurrent_sequences: 16", "      peak_concurrent_sequences: no"), 21,
     "models[1].sla.peak_concurrent_sequences", "integer"),
    ("yaml-syntax", edit("    type: vision", "    type: [vision"), 4, "", "line 3"),
    ("merge-key", "base: &b {type: vision}\nmodels:\n  - <<: *b\n    name: x\n", 3, "models[0]", "merge keys"),
    ("empty-file", "", 1, "", "empty"),
    ("root-is-list", "- a\n- b\n", 1, "", "dictionary"),
    ("unknown-environment", edit("      peak_rps: 200", "      peak_rps: 200\n    environments:\n      prdo: {enabled: false}"),
     15, "models[0].environments.prdo", "prod"),
    ("bad-environment-patch", edit("      peak_rps: 200", "      peak_rps: 200\n    environments:\n      dev:\n        sla: {peak_rps: -3}"),
     16, "models[0].environments.dev.sla.peak_rps", "greater than 0"),
]


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
                                  "modelfleet:replica": {}})
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
