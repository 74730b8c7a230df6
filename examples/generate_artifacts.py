"""Write the example fleet's small, real ONNX artifacts, deterministically, for local serving.

Why generated and not committed: they are a few hundred KB of binary that the same seed always recreates.
``scripts/setup.sh`` runs this; ``modelfleet serve`` then finds them by its artifact convention
(``s3://BUCKET/KEY`` -> ``examples/s3/BUCKET/KEY``). Each model keeps the exact tensor signature of its
models.yaml entry, so the compiled config.pbtxt serves it unchanged:

    resnet50-classifier  images fp32 [N,3,224,224] -> probabilities fp32 [N,1000]
                         (8x8 patch conv, ReLU, global average pool, dense, softmax)
    text-embedder        input_ids, attention_mask int64 [N,L] -> embedding fp32 [N,384]
                         (hashed token embedding table, masked mean pooling, L2 normalisation)
    fraud-scorer         features fp32 [N,64] -> fraud_probability fp32 [N,1]  (two-layer MLP, sigmoid)

The weights are random (numpy seed per model): the models are small stand-ins for the real ones, but their
inference is real onnxruntime inference. image-preprocessor needs no generation: its model.py is committed.

Usage: python examples/generate_artifacts.py [ROOT]   (default ROOT: examples/s3 next to this file)
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BUCKET_PREFIX = "acme-ml-models/triton"
EMBEDDING_VOCAB = 512  # token ids are hashed into this many rows (ids mod 512): any id is valid
OPSET, IR_VERSION = 17, 8  # readable by every onnxruntime since 1.14


def _model(name: str, nodes: list, inputs: list, outputs: list, weights: dict[str, np.ndarray]) -> bytes:
    """A checked ModelProto, serialized (deterministic: no timestamps, fixed producer)."""
    graph = helper.make_graph(nodes, name, inputs, outputs,
                              initializer=[numpy_helper.from_array(v, k) for k, v in sorted(weights.items())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="modelfleet-examples", producer_version="1")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model, full_check=True)
    return model.SerializeToString()


def classifier(seed: int = 50) -> bytes:
    """resnet50-classifier's signature: images [N,3,224,224] -> probabilities [N,1000] (rows sum to 1)."""
    rng = np.random.default_rng(seed)
    weights = {"conv_w": (rng.standard_normal((16, 3, 8, 8)) * 0.05).astype(np.float32),
               "dense_w": (rng.standard_normal((16, 1000)) * 0.5).astype(np.float32),
               "dense_b": np.zeros(1000, np.float32)}
    nodes = [helper.make_node("Conv", ["images", "conv_w"], ["conv"], kernel_shape=[8, 8], strides=[8, 8]),
             helper.make_node("Relu", ["conv"], ["relu"]),
             helper.make_node("GlobalAveragePool", ["relu"], ["pooled"]),
             helper.make_node("Flatten", ["pooled"], ["features"], axis=1),
             helper.make_node("Gemm", ["features", "dense_w", "dense_b"], ["logits"]),
             helper.make_node("Softmax", ["logits"], ["probabilities"], axis=-1)]
    return _model("resnet50-classifier", nodes,
                  [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, 224, 224])],
                  [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["N", 1000])], weights)


def embedder(seed: int = 384) -> bytes:
    """text-embedder's signature: input_ids, attention_mask [N,L] -> embedding [N,384], unit length."""
    rng = np.random.default_rng(seed)
    weights = {"table": rng.standard_normal((EMBEDDING_VOCAB, 384)).astype(np.float32),
               "vocab": np.array(EMBEDDING_VOCAB, np.int64), "axis1": np.array([1], np.int64),
               "last": np.array([-1], np.int64), "one": np.array(1.0, np.float32)}
    nodes = [helper.make_node("Mod", ["input_ids", "vocab"], ["ids"]),
             helper.make_node("Gather", ["table", "ids"], ["tokens"]),
             helper.make_node("Cast", ["attention_mask"], ["mask"], to=TensorProto.FLOAT),
             helper.make_node("Unsqueeze", ["mask", "last"], ["mask3"]),
             helper.make_node("Mul", ["tokens", "mask3"], ["masked"]),
             helper.make_node("ReduceSum", ["masked", "axis1"], ["summed"], keepdims=0),
             helper.make_node("ReduceSum", ["mask", "axis1"], ["count"], keepdims=1),
             helper.make_node("Max", ["count", "one"], ["safe_count"]),
             helper.make_node("Div", ["summed", "safe_count"], ["mean"]),
             helper.make_node("LpNormalization", ["mean"], ["embedding"], axis=-1, p=2)]
    return _model("text-embedder", nodes,
                  [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["N", "L"]),
                   helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["N", "L"])],
                  [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["N", 384])], weights)


def fraud_scorer(seed: int = 64) -> bytes:
    """fraud-scorer's signature: features [N,64] -> fraud_probability [N,1] in (0, 1)."""
    rng = np.random.default_rng(seed)
    weights = {"w1": (rng.standard_normal((64, 32)) * 0.2).astype(np.float32), "b1": np.zeros(32, np.float32),
               "w2": (rng.standard_normal((32, 1)) * 0.2).astype(np.float32), "b2": np.zeros(1, np.float32)}
    nodes = [helper.make_node("Gemm", ["features", "w1", "b1"], ["hidden"]),
             helper.make_node("Relu", ["hidden"], ["active"]),
             helper.make_node("Gemm", ["active", "w2", "b2"], ["logit"]),
             helper.make_node("Sigmoid", ["logit"], ["fraud_probability"])]
    return _model("fraud-scorer", nodes, [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["N", 64])],
                  [helper.make_tensor_value_info("fraud_probability", TensorProto.FLOAT, ["N", 1])], weights)


ARTIFACTS: dict[str, Callable[[], bytes]] = {
    "resnet50-classifier": classifier, "text-embedder": embedder, "fraud-scorer": fraud_scorer}


def write_artifacts(root: Path, names: tuple[str, ...] = tuple(ARTIFACTS)) -> list[Path]:
    """Write ``root/acme-ml-models/triton/<name>/1/model.onnx`` for ``names``; rewrite only what changed."""
    written = []
    for name in names:
        target = Path(root) / BUCKET_PREFIX / name / "1" / "model.onnx"
        data = ARTIFACTS[name]()
        if not (target.is_file() and target.read_bytes() == data):
            target.parent.mkdir(parents=True, exist_ok=True)
            target.with_suffix(".partial").write_bytes(data)
            target.with_suffix(".partial").replace(target)
        written.append(target)
    return written


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent / "s3"
    for path in write_artifacts(out):
        print(f"{path} ({path.stat().st_size // 1024} KiB)")
