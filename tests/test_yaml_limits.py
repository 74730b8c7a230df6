"""The YAML layer's limits: alias bombs, deep nesting and huge documents stop fast with a located issue;
YAML 1.1 surprises are read as YAML 1.2; and models.schema.json agrees with the loader."""

from __future__ import annotations

import json
import time
import tracemalloc

import pytest

from modelfleet.errors import SpecError
from modelfleet.spec import yaml_source as yamlsource
from modelfleet.spec.load import parse_fleet_text
from modelfleet.spec.yaml_source import parse_yaml
from tests.conftest import ROOT


def billion_laughs(levels: int = 10) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines + [f"models: *a{levels - 1}"])


def test_billion_laughs_stops_fast_and_small():
    tracemalloc.start()
    started = time.process_time()  # this process's CPU: other processes on a shared machine do not count
    with pytest.raises(SpecError) as caught:
        parse_fleet_text(billion_laughs())
    seconds = time.process_time() - started
    peak_mib = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    (issue,) = caught.value.issues
    assert "an alias here expands to" in issue.message and issue.line > 0, str(issue)
    assert seconds < 2.0 and peak_mib < 64, (seconds, peak_mib)  # unbounded: minutes and gigabytes


def test_ordinary_aliases_are_expanded():
    text = "tensors: &t [{name: x, dtype: fp32, dims: [3]}]\n" + "\n".join(f"m{i}: *t" for i in range(2000))
    doc = parse_yaml(text, "m.yaml")
    assert doc.issues == [] and doc.data["m1999"] == [{"name": "x", "dtype": "fp32", "dims": [3]}]


def test_too_many_values_is_an_issue_not_silent_nones(monkeypatch):
    monkeypatch.setattr(yamlsource, "MAX_NODES", 50)
    with pytest.raises(SpecError) as caught:
        parse_yaml("items: [" + ", ".join(str(i) for i in range(100)) + "]", "m.yaml")
    (issue,) = caught.value.issues
    assert "more than 50 values" in issue.message and issue.path.startswith("items[")


def test_nesting_too_deep_stops_at_its_line():
    with pytest.raises(SpecError) as caught:
        parse_yaml("a:\n  b: " + "[" * 100 + "]" * 100, "m.yaml")
    (issue,) = caught.value.issues
    assert issue.line == 2 and "nested deeper than 64 levels" in issue.message


@pytest.mark.parametrize("written,value", [("1e3", 1000.0), ("1.5e-3", 0.0015), ("010", 10), ("0x1F", 31),
                                           ("1_000", 1000), ("1:30", "1:30"), ("no", "no"), ("'5'", "5"),
                                           ("2026-01-01", "2026-01-01"), ("true", True), ("False", False)])
def test_scalars_follow_yaml_1_2(written, value):
    assert parse_yaml(f"a: {written}", "m.yaml").data["a"] == value


@pytest.mark.parametrize("written,words", [("!!int abc", "not a whole number"), ("!!float abc", "not a number"),
                                           ("!!int 1.5", "not a whole number"), ("1.0e+400", "too large"),
                                           ("9" * 5000, "5,000 digits")])
def test_unreadable_scalars_are_located_issues(written, words):
    doc = parse_yaml(f"a: 1\nb: {written}", "m.yaml")
    (issue,) = doc.issues
    assert (issue.line, issue.path) == (2, "b") and words in issue.message
    assert ("b",) in doc.unreadable


def test_schema_accepts_the_example_and_rejects_out_of_bounds_numbers():
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((ROOT / "models.schema.json").read_text())
    example = parse_yaml((ROOT / "models.yaml").read_text(), "models.yaml").data
    jsonschema.validate(example, schema)  # params: 25.6M, presets by name, s3:// and Hugging Face artifacts
    example["models"][0]["sla"]["peak_rps"] = 1e12
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(example, schema)
