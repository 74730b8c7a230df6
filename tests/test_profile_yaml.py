"""Writing a measured profile into models.yaml: only the profile's lines change, comments and order stay.
Pure (ruamel.yaml on text), no engine."""

from __future__ import annotations

import difflib
import textwrap

import pytest

from modelfleet.commands.profile_yaml import classic_block, llm_block, patch_profile, render_block
from modelfleet.engines.triton_profile import BatchMeasurement, batch_body, batch_sizes, summarise_batch
from modelfleet.engines.loadgen import Sample
from modelfleet.engines.vllm_bench import LlmLoad, LlmMeasurement, bench_arguments, read_result
from modelfleet.errors import SpecError
from modelfleet.spec.load import parse_fleet_text
from tests.conftest import ROOT

ROWS = [BatchMeasurement(1, 100, 100, 1.0, 400.0, 2.0, 2.5, None),
        BatchMeasurement(8, 80, 80, 1.0, 2400.0, 3.0, 3.4, None)]


def changed(before: str, after: str) -> list[tuple[str, list[str], list[str]]]:
    """The changed line groups. autojunk off: in a file of 200 lines or more, difflib would otherwise treat lines
    that recur (``measured_on: a10g``) as junk and group an unchanged one into a change."""
    a, b = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(op, a[i1:i2], b[j1:j2]) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal"]


def test_the_example_catalogue_round_trips_byte_for_byte():
    text = (ROOT / "models.yaml").read_text()
    assert patch_profile(text, "fraud-scorer", {}) == text


def test_an_existing_profile_is_updated_in_place_and_its_other_keys_kept():
    text = (ROOT / "models.yaml").read_text()
    after = patch_profile(text, "text-embedder", classic_block(ROWS, "a10g", "2026-01-02"))
    assert changed(text, after) == [
        ("replace", ["      rps_per_instance: 2500"], ["      rps_per_instance: 2400.0"]),
        ("replace", ["      compute_ms: 12"], ["      compute_ms: 3.4"]),
        ("insert", [], ["      measured_at: '2026-01-02'", "      batches:",
                        "        - {batch_size: 1, throughput_rps: 400.0, p99_ms: 2.5}",
                        "        - {batch_size: 8, throughput_rps: 2400.0, p99_ms: 3.4}"])]
    # efficient_batch_size (with its comment) stays where it was, and the result is a valid catalogue
    assert "      efficient_batch_size: 16    # model_analyzer: the knee of its throughput curve" in after
    profile = parse_fleet_text(after).model("text-embedder").profile
    assert profile.batches[1].p99_ms == 3.4 and profile.efficient_batch_size == 16


def test_a_new_profile_goes_after_the_sla():
    text = textwrap.dedent("""\
        models:
          - name: chat   # the assistant
            type: llm
            artifact: org/model
            size: {dtype: bf16}
            architecture: llama-3.1-8b
            sla:
              max_context_tokens: 4096
              peak_concurrent_sequences: 8   # from last quarter's peak
              p99_ttft_ms: 2000
            team: assistants
        """)
    measurement = LlmMeasurement(16, 0, 3.2, 80.0, 150.0, 7.0, 9.5, 1100.0)
    after = patch_profile(text, "chat", llm_block(measurement, LlmLoad(8, 1024, 256, 32), "h100", "2026-01-02", 1))
    ((op, _, added),) = changed(text, after)
    assert op == "insert" and added[0] == "    profile:" and added[1] == "      measured_on: h100"
    assert after.index("    profile:") > after.index("p99_ttft_ms: 2000") and after.endswith("    team: assistants\n")
    assert parse_fleet_text(after).models[0].profile.tpot_p99_ms == 9.5


def test_an_unknown_model_is_a_spec_error():
    with pytest.raises(SpecError, match="no model named 'nope'"):
        patch_profile("models:\n  - name: a\n", "nope", {})


def test_print_renders_the_block_as_it_would_be_written():
    text = render_block("fraud-scorer", classic_block(ROWS, "cpu", "2026-01-02"))
    assert text == ("# models.yaml, model fraud-scorer:\nprofile:\n  measured_on: cpu\n  measured_at: '2026-01-02'\n"
                    "  compute_ms: 3.4\n  rps_per_instance: 2400.0\n  batches:\n"
                    "    - {batch_size: 1, throughput_rps: 400.0, p99_ms: 2.5}\n"
                    "    - {batch_size: 8, throughput_rps: 2400.0, p99_ms: 3.4}\n")


def test_batch_sizes_bodies_and_figures(plans):
    assert batch_sizes(0) == (1,) and batch_sizes(1) == (1,) and batch_sizes(48) == (1, 2, 4, 8, 16, 32, 48)
    embedder = plans["dev"].model("text-embedder")
    import json
    body = json.loads(batch_body(embedder, 4, 7))
    assert body["inputs"][0]["shape"] == [4, 4] and body["inputs"][0]["data"][:4] == [28, 0, 0, 0]  # 7 x 4 + 0
    assert len({batch_body(embedder, 4, k) for k in range(1000)}) == 1000  # no two alike: no cache hits
    # throughput is items per second of request time: 3 answers of 10 ms at batch 4 -> 400 items/s
    samples = [Sample(0.0, 0.0, 0.010, "ok"), Sample(0.02, 0.02, 0.030, "ok"), Sample(0.04, 0.04, 0.050, "ok"),
               Sample(0.06, 0.06, 0.07, "timeout")]
    row = summarise_batch(4, samples, 0.1)
    assert (row.answered, row.requests, row.throughput_rps, row.first_error) == (3, 4, 400.0, "timeout")


def test_vllm_bench_arguments_and_result():
    args = bench_arguments("http://h:1", "chat", "/tok", LlmLoad(8, 1024, 256, 32), ROOT / "r")
    pairs = dict(zip(args[::2], args[1::2]))
    assert pairs["--max-concurrency"] == "8" and pairs["--random-input-len"] == "1024" and "--ignore-eos" in args
    result = read_result({"completed": 32, "failed": 0, "duration": 3.21, "median_ttft_ms": 80.0, "p99_ttft_ms": 150.0,
                          "median_tpot_ms": 7.0, "p99_tpot_ms": 9.5, "output_throughput": 1100.04})
    assert result == LlmMeasurement(32, 0, 3.21, 80.0, 150.0, 7.0, 9.5, 1100.0)
