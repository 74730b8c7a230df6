"""Writing a measured profile into models.yaml: only the profile's lines change, comments and order stay.
Pure (ruamel.yaml on text), no engine."""

from __future__ import annotations

import difflib
import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# ---------------------------------------------------------------------------------------------- generated shapes
# A catalogue of three models in a generated indentation (mapping indent, the dash's offset under models:), with
# anchors, aliases and merge keys in generated places. Writing one model's profile must change that model's own
# profile lines and nothing else, or be refused with the line: no other model may gain figures it never had.
SHAPES = ("none", "alias_profile", "merge_model", "merge_model_own_profile", "profile_merges", "merge_no_profile",
          "flow_profile", "no_profile")


def _catalogue(shape: str, indent: int, dash: int, comment: bool) -> str:
    m, c = " " * indent, " " * (dash + 2)  # c: the column of a model's keys
    item = " " * dash + "- "
    note = "   # measured last quarter" if comment else ""
    a_anchor = " &a" if shape.startswith("merge_model") else ""
    p_anchor = " &p" if shape in ("alias_profile", "profile_merges") else ""
    lines = ["# the catalogue", "models:", f"{item}name: a", f"{c}type: classic{note}", f"{c}sla:{a_anchor}" if False else
             f"{c}sla:", f"{c}{m}p99_latency_ms: 50"]
    if a_anchor:  # the whole of model a's mapping is anchored: a flow key first, so the anchor sits on the item
        lines[2] = f"{item}{a_anchor.strip()}" if False else lines[2]
    if shape == "flow_profile":
        lines += [f"{c}profile: {{measured_on: t4, compute_ms: 9}}{note}"]
    elif shape != "no_profile":
        lines += [f"{c}profile:{p_anchor}", f"{c}{m}measured_on: a10g{note}", f"{c}{m}compute_ms: 12",
                  f"{c}{m}efficient_batch_size: 16"]
    lines += [f"{c}team: risk", f"{item}name: b", f"{c}type: classic"]
    if shape == "alias_profile":
        lines += [f"{c}profile: *p"]
    elif shape == "profile_merges":
        lines += [f"{c}profile:", f"{c}{m}<<: *p", f"{c}{m}compute_ms: 30"]
    elif shape.startswith("merge_model"):
        lines += [f"{c}<<: *a"]
        if shape == "merge_model_own_profile":
            lines += [f"{c}profile:", f"{c}{m}measured_on: t4", f"{c}{m}compute_ms: 40"]
    elif shape == "merge_no_profile":
        lines += [f"{c}sla: *s"]
    lines += [f"{item}name: c", f"{c}type: classic", f"{c}sla:{' &s' if shape == 'merge_no_profile' else ''}",
              f"{c}{m}p99_latency_ms: 70", "# end"]
    text = "\n".join(lines) + "\n"
    if shape.startswith("merge_model"):  # anchor model a's mapping: `- &a` then its keys on the next lines
        text = text.replace(f"{item}name: a\n", f"{item}&a\n{c}name: a\n", 1)
    if shape == "merge_no_profile":  # the alias must follow its anchor: c's sla is anchored, so c goes first
        head, rest = text.split(f"{item}name: a\n", 1)
        a_part, rest = rest.split(f"{item}name: b\n", 1)
        b_part, c_part = rest.split(f"{item}name: c\n", 1)
        c_body, end = c_part.rsplit("# end\n", 1)
        text = head + f"{item}name: c\n" + c_body + f"{item}name: a\n" + a_part + f"{item}name: b\n" + b_part + "# end\n"
    return text


def _refused(shape: str, target: str) -> bool:
    return ((shape == "alias_profile" and target in "ab") or (shape == "profile_merges" and target in "ab")
            or (shape == "merge_model" and target in "ab") or (shape == "merge_model_own_profile" and target == "a"))


@settings(max_examples=200, deadline=None)
@given(shape=st.sampled_from(SHAPES), indent=st.sampled_from([2, 3, 4]), dash=st.sampled_from([0, 2, 4]),
       comment=st.booleans(), target=st.sampled_from("abc"))
def test_a_profile_is_written_into_the_models_own_mapping_or_refused(shape, indent, dash, comment, target):
    import yaml

    text = _catalogue(shape, indent, dash, comment)
    before = {m["name"]: m for m in yaml.safe_load(text)["models"]}
    values = classic_block(ROWS, "h100", "2026-01-02")
    if _refused(shape, target):
        with pytest.raises(SpecError) as refused:
            patch_profile(text, target, values)
        (issue,) = refused.value.issues
        assert issue.line > 0 and "profile" in issue.message and issue.fix, issue
        return
    after = patch_profile(text, target, values)  # in the file's own indentation, whichever it is
    loaded = {m["name"]: m for m in yaml.safe_load(after)["models"]}
    for name, model in loaded.items():
        if name != target:
            assert model == before[name], name  # no other model gained (or lost) a figure
    assert {k: loaded[target]["profile"][k] for k in values} == {**values, "batches": values["batches"]}
    # every changed line is the target's own profile line (old side) or a new line of it (new side)
    for op, removed, added in changed(text, after):
        assert all(line.startswith(" " * (dash + 2 + indent)) or line.lstrip().startswith("profile:")
                   for line in removed + added), (op, removed, added)


def test_a_profile_inherited_through_a_merge_is_refused_with_its_line():
    text = _catalogue("merge_model", 2, 2, False)
    with pytest.raises(SpecError) as refused:
        patch_profile(text, "b", classic_block(ROWS, "h100", "2026-01-02"))
    (issue,) = refused.value.issues
    assert (issue.line, issue.path) == (text.splitlines().index("    <<: *a") + 1, "models[b].profile")
    assert "comes from the merge key (<<) on this line (anchored on line 3)" in issue.message


def test_a_file_whose_style_cannot_be_kept_is_refused_and_left_alone():
    """Two indentations in one file: any dump re-indents one of them, so nothing is written."""
    text = ("models:\n  - name: a\n    type: classic\n    sla:\n      p99_latency_ms: 50\n"
            "  - name: b\n    type: classic\n    sla:\n        p99_latency_ms: 70\n")
    with pytest.raises(SpecError) as refused:
        patch_profile(text, "a", classic_block(ROWS, "h100", "2026-01-02"))
    (issue,) = refused.value.issues
    assert issue.line == 6 and "without changing lines outside it" in issue.message and "--print" in issue.fix
