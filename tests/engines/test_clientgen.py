"""``modelfleet client``: the generated module, byte for byte (golden), and its request checks (no server).

Rewrite the golden file only on purpose: MODELFLEET_UPDATE_GOLDEN=1 python -m pytest tests/engines/test_clientgen.py
(the same module is used against the real server in test_fleet_on_triton.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from modelfleet.cli import main
from modelfleet.render.client import class_name, identifier, render_client
from tests.conftest import ROOT, update_golden
from tests.engines.conftest import load_module

GOLDEN = Path(__file__).parent / "golden" / "fleet_client.py"
STACKS = ("dev", "prod", "staging")


def fleet_plans(project):
    return [project.plan(stack) for stack in STACKS]


def test_client_module_matches_golden(project) -> None:
    source = render_client(fleet_plans(project))
    if update_golden():
        GOLDEN.write_text(source)
    assert source == GOLDEN.read_text(), "generated client changed (MODELFLEET_UPDATE_GOLDEN=1 to accept)"


def test_client_is_deterministic_and_the_cli_writes_the_same_bytes(project, tmp_path) -> None:
    out = tmp_path / "fleet_client.py"
    assert main(["--project", str(ROOT), "client", "--out", str(out)]) == 0
    assert out.read_text() == render_client(fleet_plans(project)) == render_client(fleet_plans(project)[::-1])


def test_dev_and_prod_share_one_client_with_the_strictest_limits(project, client_module) -> None:
    """The issue's case: the stacks batch the text-embedder differently (a GPU with less memory batches less);
    the one module refuses, for every stack, what the strictest would."""
    np = pytest.importorskip("numpy")
    sizes = {stack: project.plan(stack).model("text-embedder").max_batch_size for stack in ("dev", "staging", "prod")}
    strictest = min(sizes.values())
    assert client_module.TextEmbedder.max_batch_size == strictest
    ids = np.ones((max(sizes.values()) * 2, 8), dtype=np.int64)
    with pytest.raises(ValueError, match=rf"input_ids: batch {len(ids)}, expected 1..{strictest}"):
        client_module.TextEmbedder.request(ids, ids, caller="tests")
    assert "stacks dev, prod, staging" in client_module.__doc__


def test_every_request_names_its_caller_in_a_header(client_module) -> None:
    np = pytest.importorskip("numpy")
    request = client_module.FraudScorer.request(np.zeros((1, 64), np.float32), caller="checkout-service")
    assert request.options["headers"] == {"x-modelfleet-caller": "checkout-service"}
    for bad in ("", "two words", "x" * 200, None):
        with pytest.raises(ValueError, match="caller"):
            client_module.FraudScorer.request(np.zeros((1, 64), np.float32), caller=bad)


def test_a_model_that_differs_between_stacks_has_no_one_client(project) -> None:
    from modelfleet.errors import CompileError

    dev, prod = project.plan("dev"), project.plan("prod")
    embedder = prod.model("text-embedder")
    changed = embedder.model_copy(update={"inputs": embedder.inputs[:1]})
    prod = prod.model_copy(update={"models": tuple(changed if m.name == "text-embedder" else m for m in prod.models)})
    with pytest.raises(CompileError, match="text-embedder differs between stacks dev, prod"):
        render_client([dev, prod])


def test_names_become_python_identifiers() -> None:
    assert class_name("resnet50-classifier") == "Resnet50Classifier"
    assert class_name("a.b_c-d") == "ABCD"
    assert [identifier(n) for n in ("input_ids", "input-ids", "class", "0th")] == [
        "input_ids", "input_ids", "class_", "t_0th"]


@pytest.fixture(scope="module")
def client_module(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("tritonclient.http")
    path = tmp_path_factory.mktemp("client") / "fleet_client.py"
    path.write_text(GOLDEN.read_text())
    return load_module(path, "fleet_client_golden")


def test_requests_carry_the_compiled_names_dtypes_and_shapes(client_module) -> None:
    np = pytest.importorskip("numpy")
    import tritonclient.grpc as grpcclient

    ids = np.ones((2, 7), dtype=np.int64)
    request = client_module.TextEmbedder.request(ids, ids, caller="tests")
    assert request.model_name == "text-embedder"
    assert [(i.name(), i.datatype(), i.shape()) for i in request.inputs] == [
        ("input_ids", "INT64", [2, 7]), ("attention_mask", "INT64", [2, 7])]
    assert [o.name() for o in request.outputs] == ["embedding"]
    grpc_request = client_module.FraudScorer.request(np.zeros((3, 64), np.float32), caller="tests", protocol=grpcclient)
    assert isinstance(grpc_request.inputs[0], grpcclient.InferInput)
    images = np.array([[b"P6 1 1 255\n..."]], dtype=np.object_)
    assert client_module.ImagePreprocessor.request(images, caller="tests").inputs[0].datatype() == "BYTES"


@pytest.mark.parametrize("shape, dtype, message", [
    ((2, 64), "float64", "features: dtype float64, expected FP32"),
    ((2, 63), "float32", r"features: shape \[2, 63\], expected \[batch, 64\]"),
    ((64,), "float32", r"features: shape \[64\], expected \[batch, 64\]"),
    # fraud-scorer: max_batch_size 32 on its CPU server (prod, staging), 128 on dev's GPU; the client holds the strictest
    ((33, 64), "float32", r"features: batch 33, expected 1..32"),
])
def test_requests_refuse_what_the_server_would_refuse(client_module, shape, dtype: str, message: str) -> None:
    np = pytest.importorskip("numpy")
    with pytest.raises(ValueError, match=message):
        client_module.FraudScorer.request(np.zeros(shape, dtype=dtype), caller="tests")


class PartialResult:
    """An InferResult without the named outputs: tritonclient's as_numpy answers None for those."""

    def __init__(self, missing: str) -> None:
        self.missing = missing

    def as_numpy(self, name: str):
        np = pytest.importorskip("numpy")
        return None if name == self.missing else np.zeros((1, 1), np.float32)


def test_decode_refuses_a_missing_output_instead_of_returning_none(client_module) -> None:
    assert client_module.FraudScorer.decode(PartialResult("other")).fraud_probability.shape == (1, 1)
    with pytest.raises(ValueError, match="fraud_probability: not in the response"):
        client_module.FraudScorer.decode(PartialResult("fraud_probability"))
