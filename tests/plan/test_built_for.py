"""GPU-specific artifacts (``built_for``): a TensorRT plan is placed only on the GPU it was built for, served by
the Triton release whose TensorRT built it, and every way that cannot hold is a located error with the fix.
Pure: specs in, plans or issues out."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelfleet.errors import CompileError, SpecError
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.plan.triton.built_for import image_for, tensorrt_releases
from modelfleet.plan.types import TritonModelPlan
from modelfleet.spec.built_for import version_matches
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.load import parse_fleet_text

CATALOGUE = load_instance_catalogue()
GPU_FAMILIES = tuple(sorted({i.family for i in CATALOGUE.instances.values()}))
PROD = EnvironmentSpec(name="prod", region="us-east-1", instance_families=("g5", "g6", "g6e"))


def model(name: str = "detector", framework: str = "tensorrt", built_for: str = "{gpu: a10g, tensorrt: 10.7.0}",
          measured_on: str = "a10g", extra: str = "") -> str:
    built = f"\n    built_for: {built_for}" if built_for else ""
    return f"""
  - name: {name}
    type: vision
    framework: {framework}
    artifact: s3://bucket/{name}{built}
    size: {{memory_gib: 2}}
    inputs: [{{name: images, dtype: fp32, dims: [3, 224, 224]}}]
    outputs: [{{name: boxes, dtype: fp32, dims: [100, 4]}}]
    sla: {{p99_latency_ms: 100, peak_rps: 50}}
    profile: {{rps_per_instance: 400, measured_on: {measured_on}, compute_ms: 20}}{extra}
"""


def compile_text(text: str, env: EnvironmentSpec = PROD):
    return compile_fleet(parse_fleet_text("models:" + text), env, CATALOGUE)


def triton(plan, name: str) -> TritonModelPlan:
    found = plan.model(name)
    assert isinstance(found, TritonModelPlan)
    return found


def test_a_plan_built_for_an_a10g_stays_on_a10g_although_an_l4_is_cheaper():
    """Without built_for the same model goes to the cheaper g6 (L4); built for an A10G it goes to g5 only, and
    the decision says why every L4 and L40S type was rejected."""
    free = compile_text(model(framework="onnx", built_for=""))
    assert CATALOGUE.instances[triton(free, "detector").instance_type].gpu.key != "a10g"
    plan = compile_text(model())
    placed = triton(plan, "detector")
    assert CATALOGUE.instances[placed.instance_type].gpu.key == "a10g"
    server = next(s for s in plan.triton_servers if "detector" in s.models)
    rejected = {r.option: r.reason for r in server.decision.rejected}
    assert "g6.xlarge" in rejected and "built for a10g" in rejected["g6.xlarge"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gpu=st.sampled_from(sorted({i.gpu.key for i in CATALOGUE.instances.values()})),
       families=st.lists(st.sampled_from(GPU_FAMILIES), min_size=1, max_size=4, unique=True))
def test_a_gpu_specific_artifact_is_never_placed_on_another_gpu(gpu, families):
    """Any GPU, any allowed families: placed on that GPU, or a located error at built_for.gpu with the fix."""
    env = EnvironmentSpec(name="prod", region="us-east-1", instance_families=tuple(families))
    text = model(built_for=f"{{gpu: {gpu}, tensorrt: '10.7'}}", measured_on=gpu) + model(
        "embedder", framework="onnx", built_for="")
    try:
        plan = compile_text(text, env)
    except CompileError as exc:
        located = [i for i in exc.issues if i.path == "models[0].built_for.gpu"]
        assert located or all("built_for" not in i.path for i in exc.issues)
        if located:
            assert gpu in located[0].message and "rebuild" in located[0].fix
        return
    assert CATALOGUE.instances[triton(plan, "detector").instance_type].gpu.key == gpu


def test_two_plans_built_for_different_gpus_are_an_error_at_the_second():
    text = model() + model("segmenter", built_for="{gpu: l4, tensorrt: 10.7.0}", measured_on="l4")
    with pytest.raises(CompileError) as exc:
        compile_text(text)
    issue = next(i for i in exc.value.issues if i.path == "models[1].built_for.gpu")
    assert "detector (models[0]) for a10g" in issue.message and "one GPU instance type" in issue.message


def test_a_gpu_the_stack_does_not_allow_names_the_families_that_have_it():
    with pytest.raises(CompileError) as exc:
        compile_text(model(built_for="{gpu: h100, tensorrt: 10.7.0}", measured_on="h100"))
    issue = next(i for i in exc.value.issues if i.path == "models[0].built_for.gpu")
    assert "allows no instance type with one" in issue.message and "p5" in issue.fix


@pytest.mark.parametrize("built_for, framework, extra, path, words", [
    ("", "tensorrt", "", "framework", "does not say which"),
    ("{gpu: a10g}", "tensorrt", "", "built_for", "does not say which"),
    ("{gpu: a10g, tensorrt: '10.7'}", "onnx", "", "built_for.tensorrt", "not a TensorRT plan"),
    ("{gpu: a10g}", "onnx", "\n    device: cpu", "device", "cannot run on KIND_CPU"),
    ("{gpu: l4, tensorrt: '10.7'}", "tensorrt", "", "profile.measured_on", "measured on a10g"),
    ("{gpu: a10g, tensorrt: ten}", "tensorrt", "", "built_for.tensorrt", "expected format"),
])
def test_contradictions_are_located_spec_errors(built_for, framework, extra, path, words):
    with pytest.raises(SpecError) as exc:
        parse_fleet_text("models:" + model(framework=framework, built_for=built_for, extra=extra))
    issue = next(i for i in exc.value.issues if i.path.endswith(path))
    assert words in issue.message


def test_the_server_runs_the_triton_release_whose_tensorrt_built_the_plan():
    """10.0 is 24.05's TensorRT; the stack's default image (26.09) is not listed, so the server runs 24.05;
    the ONNX model beside it keeps the stack's image on a server of its own (pool g5-xlarge, not -trt10-0)."""
    plan = compile_text(model(built_for="{gpu: a10g, tensorrt: 10.0.1}") + model("embedder", framework="onnx",
                                                                                  built_for=""))
    servers = {s.name: s for s in plan.triton_servers}
    trt = next(s for s in servers.values() if "detector" in s.models)
    assert trt.image == "nvcr.io/nvidia/tritonserver:24.05-py3" and "trt10-0" in trt.name
    other = next(s for s in servers.values() if "embedder" in s.models)
    assert other.image == PROD.triton.image and "detector" not in other.models


def test_a_tensorrt_version_no_release_ships_is_an_error_listing_the_known_ones():
    with pytest.raises(CompileError) as exc:
        compile_text(model(built_for="{gpu: a10g, tensorrt: '10.99'}"))
    issue = next(i for i in exc.value.issues if i.path == "models[0].built_for.tensorrt")
    assert all(r.tensorrt in issue.message for r in tensorrt_releases()) and "rebuild" in issue.fix


def test_a_declared_pool_of_two_tensorrt_versions_is_an_error():
    pooled = "\n    pool: vision"
    text = model(built_for="{gpu: a10g, tensorrt: '10.0'}", extra=pooled) + model(
        "segmenter", built_for="{gpu: a10g, tensorrt: '10.7'}", extra=pooled)
    with pytest.raises(CompileError) as exc:
        compile_text(text)
    assert any(i.path == "models[1].pool" and "one TensorRT release" in i.message for i in exc.value.issues)


@given(declared=st.lists(st.integers(0, 30), min_size=2, max_size=4), shipped=st.lists(st.integers(0, 30),
                                                                                       min_size=4, max_size=4))
def test_a_version_matches_exactly_the_releases_sharing_every_declared_part(declared, shipped):
    text = lambda parts: ".".join(map(str, parts))  # noqa: E731
    assert version_matches(text(declared), text(shipped)) == (shipped[:len(declared)] == declared)


def test_the_stack_image_is_kept_when_it_is_the_matching_release():
    assert image_for("10.7", "nvcr.io/nvidia/tritonserver:24.12-py3") == "nvcr.io/nvidia/tritonserver:24.12-py3"
    assert image_for("10.7", "nvcr.io/nvidia/tritonserver:24.05-py3") == "nvcr.io/nvidia/tritonserver:24.12-py3"
    assert image_for(None, "mirror.example/tritonserver:x") == "mirror.example/tritonserver:x"


def test_a_gpu_the_instance_table_does_not_know_is_an_error():
    with pytest.raises(CompileError) as exc:
        compile_text(model(built_for="{gpu: b200, tensorrt: 10.7.0}", measured_on="b200"))
    issue = next(i for i in exc.value.issues if i.path == "models[0].built_for.gpu")
    assert "'b200' is not a GPU of the instance table" in issue.message
