"""How ``modelfleet serve`` adapts a compiled repository to this machine: only what a CPU must change.

No server here: the adaptation is planned and written as files, and checked against the compiled render.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from modelfleet.commands.serve import StopRequested, stop_signals
from modelfleet.errors import CompileError
from modelfleet.plan.types import TritonModelPlan
from modelfleet.render.fleet import render_fleet
from modelfleet.render.triton import parse_config
from modelfleet.serve import LOCAL_CACHE_CAP_BYTES, local_artifact_dir, plan_local_repository, write_local_repository
from modelfleet.serve.runners import BACKEND_DISPATCHER, SYNTHETIC_SOURCE, backend_files
from tests.conftest import ROOT, STACKS
from tests.engines.conftest import PREPROCESSOR, load_module, make_artifact_root

mc = pytest.importorskip("tritonclient.grpc.model_config_pb2")

PYTHON_ONLY = frozenset({"python"})  # what the nvidia-pytriton tritonserver has


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real artifacts for the classifier and the preprocessor only: the others become synthetic."""
    return make_artifact_root(tmp_path_factory.mktemp("artifacts"), ("resnet50-classifier",), preprocessor=True)


def compiled_configs(plan) -> dict[str, mc.ModelConfig]:
    return {path.split("/")[-2]: parse_config(text.decode()) for path, text in render_fleet(plan).items()
            if path.endswith("config.pbtxt")}


@pytest.mark.parametrize("stack", STACKS)
def test_written_configs_equal_the_compiled_ones_except_instance_group(plans, stack, artifacts, tmp_path) -> None:
    plan = plans[stack]
    local = plan_local_repository(plan, artifacts, PYTHON_ONLY)
    repository = write_local_repository(local, tmp_path / "repo", tmp_path / "backends")
    compiled = compiled_configs(plan)
    classic = sorted(m.name for m in plan.models if isinstance(m, TritonModelPlan))
    ensembles = sorted(p.name for p in plan.pipelines)
    assert sorted(p.name for p in repository.iterdir()) == sorted(classic + ensembles)
    for name in ensembles:  # served exactly as compiled: an ensemble has no instances to move
        assert parse_config((repository / name / "config.pbtxt").read_text()) == compiled[name]
        assert sorted(p.name for p in (repository / name).iterdir()) == ["1", "config.pbtxt"]
    for name in classic:
        written = parse_config((repository / name / "config.pbtxt").read_text())
        want = compiled[name]
        assert [(g.kind, g.count, list(g.gpus)) for g in written.instance_group] == [
            (mc.ModelInstanceGroup.KIND_CPU, g.count, []) for g in want.instance_group]
        if plan.model(name).device == "cpu":  # compiled for KIND_CPU: written exactly as compiled
            assert written == want, name
        else:
            assert want.instance_group[0].kind == mc.ModelInstanceGroup.KIND_GPU
        written.ClearField("instance_group")
        want.ClearField("instance_group")
        assert written == want, name  # queue policy, batching, cache, tensors, backend, platform, versions


def test_each_model_runs_its_local_artifact_or_a_labelled_synthetic_stand_in(dev_plan, artifacts, tmp_path) -> None:
    local = plan_local_repository(dev_plan, artifacts, PYTHON_ONLY)
    by_name = {m.name: m for m in local.models}
    assert {n: m.source for n, m in by_name.items()} == {
        "fraud-scorer": "synthetic", "image-classification": "ensemble", "image-preprocessor": "artifact",
        "resnet50-classifier": "onnx-runner", "session-recommender": "artifact", "text-embedder": "synthetic"}
    assert local.synthetic == ("fraud-scorer", "text-embedder")
    assert all(by_name[n].note.startswith("SYNTHETIC stand-in") for n in local.synthetic)
    assert local.python_based_backends == ("onnxruntime",)
    repository = write_local_repository(local, tmp_path / "repo", tmp_path / "backends")
    assert (repository / "resnet50-classifier/1/model.onnx").read_bytes() == (
        artifacts / "acme-ml-models/triton/resnet50-classifier/1/model.onnx").read_bytes()
    assert (repository / "image-preprocessor/1/model.py").read_text() == (
        ROOT / "examples/s3" / PREPROCESSOR / "1/model.py").read_text()
    assert sorted(p.name for p in (repository / "fraud-scorer/1").iterdir()) == ["synthetic.json"]
    assert {p.name: p.read_text() for p in (tmp_path / "backends/onnxruntime").iterdir()} == backend_files()


def test_a_python_model_without_its_artifact_gets_the_synthetic_model_py(dev_plan, tmp_path) -> None:
    server = dev_plan.model("image-preprocessor").server
    local = plan_local_repository(dev_plan, tmp_path / "empty", PYTHON_ONLY, (server,))
    repository = write_local_repository(local, tmp_path / "repo", tmp_path / "backends")
    assert (repository / "image-preprocessor/1/model.py").read_text() == SYNTHETIC_SOURCE
    # a python model needs no python-based stand-in backend; the server's other models' backends may
    others = {dev_plan.model(name).backend for name in dev_plan.server(server).models} - {"python"}
    assert local.python_based_backends == tuple(sorted(others))


def test_server_flags_are_the_compiled_ones_with_a_capped_cache_and_local_ports(dev_plan, artifacts) -> None:
    local = plan_local_repository(dev_plan, artifacts, PYTHON_ONLY)
    compiled = {a for s in dev_plan.triton_servers for a in s.args[1:]}
    # one model loads at a time here (serve/repository.py says why: a starved python stub fails its warmup)
    assert set(local.server_args) - compiled == {f"--cache-config=local,size={LOCAL_CACHE_CAP_BYTES}",
                                                 "--model-load-thread-count=1"}
    assert compiled - set(local.server_args) == {a for a in compiled if a.startswith(
        ("--model-repository=", "--http-port=", "--grpc-port=", "--metrics-port=", "--cache-config="))}
    assert "--strict-readiness=true" in local.server_args and local.exit_timeout_secs == 30
    assert any("capped to 256 MiB" in line for line in local.adaptations)
    assert any("KIND_GPU -> KIND_CPU" in line for line in local.adaptations)
    if len(dev_plan.triton_servers) > 1:
        assert any(f"{len(dev_plan.triton_servers)} compiled Triton servers" in line for line in local.adaptations)


def test_one_compiled_server_can_be_chosen_and_unknown_names_are_errors(dev_plan, artifacts) -> None:
    server = dev_plan.server(dev_plan.model("resnet50-classifier").server)
    local = plan_local_repository(dev_plan, artifacts, PYTHON_ONLY, (server.name,))
    ensembles = [p.name for p in dev_plan.pipelines if p.server == server.name]
    assert [m.name for m in local.models] == sorted([*server.models, *ensembles])
    assert not any("compiled Triton servers" in line for line in local.adaptations)
    first = dev_plan.triton_servers[0].name
    with pytest.raises(CompileError, match=f"no Triton server 'nope'.*choose one of: {first}"):
        plan_local_repository(dev_plan, artifacts, PYTHON_ONLY, ("nope",))


def test_s3_artifacts_map_into_the_artifact_root() -> None:
    assert local_artifact_dir("s3://acme-ml-models/triton/x/", Path("/r")) == Path("/r/acme-ml-models/triton/x")
    assert local_artifact_dir("/models/x", Path("/r")) == Path("/models/x")


def test_runner_sources_compile() -> None:
    for source in (SYNTHETIC_SOURCE, BACKEND_DISPATCHER, *backend_files().values()):
        compile(source, "<model.py>", "exec")


def test_sigterm_and_sigint_become_a_clean_stop_request() -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):
        previous = signal.getsignal(sig)
        with pytest.raises(StopRequested, match=signal.Signals(sig).name), stop_signals():
            os.kill(os.getpid(), sig)
            signal.sigtimedwait([], 0.5)  # let the handler run
        assert signal.getsignal(sig) is previous


def test_generated_artifacts_are_deterministic_and_match_the_compiled_tensors(dev_plan, tmp_path) -> None:
    onnx = pytest.importorskip("onnx")
    generator = load_module(ROOT / "examples/generate_artifacts.py", "generate_artifacts")
    first = [p.read_bytes() for p in generator.write_artifacts(tmp_path / "a")]
    assert first == [p.read_bytes() for p in generator.write_artifacts(tmp_path / "b")]
    assert max(len(data) for data in first) < 1024**2
    types = {"TYPE_FP32": onnx.TensorProto.FLOAT, "TYPE_INT64": onnx.TensorProto.INT64}
    for name, data in zip(generator.ARTIFACTS, first):
        graph = onnx.load_from_string(data).graph
        plan = dev_plan.model(name)
        for declared, tensors in ((graph.input, plan.inputs), (graph.output, plan.outputs)):
            got = [(t.name, t.type.tensor_type.elem_type,
                    tuple(d.dim_value or -1 for d in t.type.tensor_type.shape.dim)[1:]) for t in declared]
            assert got == [(t.name, types[t.data_type], t.dims) for t in tensors], name


def test_preprocessor_decoder_reads_ppm_and_pgm_and_refuses_the_rest() -> None:
    np = pytest.importorskip("numpy")
    model = load_module(ROOT / "examples/s3" / PREPROCESSOR / "1/model.py", "preprocessor_model")
    pixels = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    assert np.array_equal(model.decode_netpbm(b"P6\n# c\n3 2\n255\n" + pixels.tobytes()), pixels)
    assert model.decode_netpbm(b"P5 3 2 255\n" + bytes(6)).shape == (2, 3, 3)
    for bad, message in ((b"\x89PNG....", "not a binary PPM"), (b"P6 3 2 65535\n", "8-bit only"),
                         (b"P6 3", "truncated header")):
        with pytest.raises(ValueError, match=message):
            model.decode_netpbm(bad)
