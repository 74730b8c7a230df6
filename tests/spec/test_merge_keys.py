"""YAML merge keys (``<<``) in models.yaml, as a catalogue of many similar models uses them (defect 11 of
#17: they were refused, and the refusal cascaded into seven "required field is missing" errors).

Semantics are YAML's merge type: the keys of the merged mapping(s) are added where the mapping does not
write them itself; of several merged mappings (``<<: [*a, *b]``) the earlier one wins. Errors stay
located: a bad value that came through a merge is reported at the line it is written on, with the path of
the model that merged it; a merge of something that is not a mapping is one error at the ``<<``.
"""

from __future__ import annotations

import time

import pytest

from modelfleet.errors import SpecError
from modelfleet.spec.load import parse_fleet_text
from modelfleet.spec.yaml_source import parse_yaml

MODEL = """\
  - name: {name}
    type: tabular
    framework: onnx
    artifact: s3://bkt/{name}
    size: {{memory_gib: 0.5}}
    inputs: [{{name: x, dtype: fp32, dims: [64]}}]
    outputs: [{{name: y, dtype: fp32, dims: [1]}}]
    sla: {{p99_latency_ms: 50, peak_rps: {rps}, availability: 99.9}}
    profile: {{rps_per_instance: 1000, compute_ms: 5, measured_on: a10g}}
"""
MERGED = """\
x-tabular: &tabular
  type: tabular
  framework: onnx
  size: {memory_gib: 0.5}
  inputs: [{name: x, dtype: fp32, dims: [64]}]
  outputs: [{name: y, dtype: fp32, dims: [1]}]
  profile: {rps_per_instance: 1000, compute_ms: 5, measured_on: a10g}
x-sla: &sla {p99_latency_ms: 50, peak_rps: 100, availability: 99.9}
models:
  - <<: *tabular
    name: scorer-a
    artifact: s3://bkt/scorer-a
    sla: *sla
  - <<: *tabular
    name: scorer-b
    artifact: s3://bkt/scorer-b
    sla:
      <<: *sla
      peak_rps: 250
"""


def test_merged_models_are_the_models_written_out():
    written = "models:\n" + MODEL.format(name="scorer-a", rps=100) + MODEL.format(name="scorer-b", rps=250)
    assert parse_fleet_text(MERGED) == parse_fleet_text(written)


def test_written_keys_win_and_the_first_of_several_merges_wins():
    doc = parse_yaml("a: &a {x: 1, y: 1}\nb: &b {x: 2, y: 2, z: 2}\nc:\n  <<: [*a, *b]\n  y: 3\n", "m.yaml")
    assert doc.issues == [] and doc.data["c"] == {"x": 1, "y": 3, "z": 2}
    assert doc.locate(("c", "y")) == (5, 3) and doc.locate(("c", "z")) == (2, 20)  # each where it is written


def test_a_bad_merged_value_is_located_where_it_is_written():
    text = MERGED.replace("compute_ms: 5,", "compute_ms: -5,")
    with pytest.raises(SpecError) as caught:
        parse_fleet_text(text)
    paths = sorted((i.path, i.line) for i in caught.value.issues)
    assert paths == [("models[0].profile.compute_ms", 7), ("models[1].profile.compute_ms", 7)]


@pytest.mark.parametrize("merge", ["5", "[*sla, 3]", "not-a-mapping", "[]"])
def test_merging_what_is_not_a_mapping_is_one_error_at_the_merge(merge: str):
    text = MERGED.replace("  - <<: *tabular\n    name: scorer-a", f"  - <<: {merge}\n    <<: *tabular\n    name: scorer-a")
    with pytest.raises(SpecError) as caught:
        parse_fleet_text(text)
    (issue,) = caught.value.issues
    assert (issue.line, issue.path) == (10, "models[0]") and "<<" in issue.message and "mapping" in issue.message


def test_a_key_written_twice_beside_a_merge_is_still_a_duplicate():
    with pytest.raises(SpecError, match="duplicate key 'name'"):
        parse_fleet_text(MERGED.replace("    name: scorer-a\n", "    name: scorer-a\n    name: scorer-c\n"))


def test_merges_cannot_bomb():
    """Each merge expands its alias again: the alias budget counts them like any alias."""
    lines = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 4)]  # *a3: 7,381 values
    lines += ["x-big: &big {k: *a3}", "models:"] + [f"  - {{<<: *big, name: m{i}}}" for i in range(20)]
    started = time.perf_counter()
    with pytest.raises(SpecError) as caught:
        parse_yaml("\n".join(lines), "m.yaml")
    assert time.perf_counter() - started < 2.0
    (issue,) = caught.value.issues
    assert "an alias here expands to" in issue.message and issue.path.startswith("models["), str(issue)
