"""Warmup samples (``warmup: {inputs: {NAME: FILE}}``): read by the loader, checked against the inputs, carried
by the plan, shipped beside config.pbtxt as Triton's ``input_data_file``. Pure (files handed in by a reader)."""

from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelfleet.errors import SpecError
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.plan.types import TritonModelPlan
from modelfleet.render.fleet import render_fleet
from modelfleet.render.triton import model_config
from modelfleet.render.warmup import warmup_files
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.load import apply_environment, parse_fleet_text

ENV = EnvironmentSpec(name="prod", region="us-east-1", instance_families=("g5",))
IMAGE = b"P6\n1 1\n255\n\x01\x02\x03"


def fleet(inputs: str, warmup: str, files: dict[str, bytes], environments: str = ""):
    text = f"""models:
  - name: reader
    type: vision
    framework: python
    handles_cancellation: true
    artifact: s3://bucket/reader
    size: {{memory_gib: 0.5}}
    inputs: {inputs}
    outputs: [{{name: out, dtype: fp32, dims: [4]}}]
    sla: {{p99_latency_ms: 100, peak_rps: 10}}
    profile: {{rps_per_instance: 100, measured_on: a10g, compute_ms: 5}}{warmup}{environments}
"""

    def read(path: str) -> bytes:
        if path not in files:
            raise FileNotFoundError(2, "No such file or directory")
        return files[path]
    return parse_fleet_text(text, read_sample=read)


STRING_INPUT = "[{name: image_bytes, dtype: string, dims: [1]}]"
WITH_SAMPLE = "\n    warmup: {inputs: {image_bytes: samples/cat.ppm}}"


def plan_of(spec) -> TritonModelPlan:
    model = compile_fleet(spec, ENV, load_instance_catalogue()).model("reader")
    assert isinstance(model, TritonModelPlan)
    return model


def test_a_string_input_without_a_sample_is_not_warmed_and_the_plan_asks_for_one():
    plan = compile_fleet(fleet(STRING_INPUT, "", {}), ENV, load_instance_catalogue())
    assert plan.model("reader").warmup_dims == ()
    asked = [w.message for w in plan.warnings if w.model == "reader" and "no warmup" in w.message]
    assert asked and "warmup: {inputs: {image_bytes: samples/reader/image_bytes}}" in asked[0]


def test_a_string_sample_is_shipped_serialised_once_per_element_and_named_by_the_config():
    model = plan_of(fleet("[{name: image_bytes, dtype: string, dims: [2]}]", WITH_SAMPLE, {"samples/cat.ppm": IMAGE}))
    assert model.warmup_dims == ((2,),)
    config = model_config(model)
    assert {w.inputs["image_bytes"].input_data_file for w in config.model_warmup} == {"image_bytes"}
    element = struct.pack("<I", len(IMAGE)) + IMAGE
    assert warmup_files(model) == {"warmup/image_bytes": element * 2}
    files = render_fleet(compile_fleet(fleet(STRING_INPUT, WITH_SAMPLE, {"samples/cat.ppm": IMAGE}), ENV,
                                       load_instance_catalogue()))
    shipped = [path for path in files if path.endswith("/reader/warmup/image_bytes")]
    assert len(shipped) == 1 and files[shipped[0]] == element


def test_inputs_without_a_sample_stay_zeros_beside_one_with_a_sample():
    inputs = "[{name: image_bytes, dtype: string, dims: [1]}, {name: scale, dtype: fp32, dims: [2]}]"
    model = plan_of(fleet(inputs, WITH_SAMPLE, {"samples/cat.ppm": IMAGE}))
    entry = model_config(model).model_warmup[0].inputs
    assert entry["scale"].zero_data and entry["image_bytes"].input_data_file == "image_bytes"
    assert [s.input for s in model.warmup_samples] == ["image_bytes"]


@given(dims=st.lists(st.integers(1, 6), min_size=1, max_size=3), extra=st.integers(-3, 3),
       dtype=st.sampled_from(["fp32", "int64", "uint8", "fp16"]))
def test_a_numeric_sample_must_hold_exactly_one_request(dims, extra, dtype):
    size = {"fp32": 4, "int64": 8, "uint8": 1, "fp16": 2}[dtype]
    count = 1
    for d in dims:
        count *= d
    content = b"\0" * max(0, count * size + extra)
    inputs = f"[{{name: x, dtype: {dtype}, dims: {dims}}}]"
    try:
        spec = fleet(inputs, "\n    warmup: {inputs: {x: x.bin}}", {"x.bin": content})
    except SpecError as exc:
        assert len(content) != count * size
        issue = next(i for i in exc.issues if i.path.endswith("warmup.inputs.x"))
        assert f"holds {len(content):,} bytes" in issue.message and "tofile" in issue.fix
        return
    assert len(content) == count * size
    assert base64.b64decode(plan_of(spec).warmup_samples[0].content_base64) == content


@pytest.mark.parametrize("warmup, files, path, words", [
    ("{inputs: {nope: samples/cat.ppm}}", {"samples/cat.ppm": IMAGE}, "warmup.inputs.nope", "not an input"),
    ("{inputs: {image_bytes: samples/missing.ppm}}", {}, "warmup.inputs.image_bytes", "cannot read"),
    ("{inputs: {image_bytes: ../cat.ppm}}", {}, "warmup.inputs", "expected format"),
    ("{inputs: {image_bytes: a/../../cat.ppm}}", {}, "warmup.inputs.image_bytes", "leaves the directory"),
])
def test_bad_samples_are_located_errors(warmup, files, path, words):
    with pytest.raises(SpecError) as exc:
        fleet(STRING_INPUT, f"\n    warmup: {warmup}", files)
    issue = next(i for i in exc.value.issues if i.path.startswith("models[0]." + path))
    assert words in issue.message


def test_an_environment_patch_keeps_the_samples_read_once():
    spec = fleet(STRING_INPUT, WITH_SAMPLE, {"samples/cat.ppm": IMAGE},
                 "\n    environments: {dev: {sla: {peak_rps: 1}}}")
    dev = apply_environment(spec.models[0], "dev")
    assert dev.sla.peak_rps == 1 and dev.warmup.sample("image_bytes") == IMAGE


def test_every_triton_model_of_the_example_fleet_is_warmed_in_every_stack(plans):
    for stack, plan in plans.items():
        triton = [m for m in plan.models if isinstance(m, TritonModelPlan)]
        assert triton and [m.name for m in triton if not m.warmup_dims] == [], stack
        assert not [w for w in plan.warnings if "no warmup" in w.message], stack
