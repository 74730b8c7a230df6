"""Serve an ONNX model on the wheel's tritonserver through the *python* backend.

Why: the tritonserver in ``nvidia-pytriton`` has no ONNX Runtime backend, only the python backend. A small
``model.py`` (:data:`RUNNER_SOURCE`) that opens ``model.onnx`` with onnxruntime gives the same I/O contract
as ``backend: "onnxruntime"`` would, so a compiled model repository can be proven locally.

Layout written by :func:`write_python_runner`::

    <model_dir>/config.pbtxt         (the caller's: backend "python", input/output names = the ONNX graph's)
    <model_dir>/<version>/model.py   (RUNNER_SOURCE)
    <model_dir>/<version>/model.onnx

How the stub imports onnxruntime and numpy: the python backend runs ``model.py`` in
``triton_python_backend_stub``, which embeds libpython with pybind11's *isolated* config (``PYTHONPATH`` is
ignored) and derives ``sys.prefix`` from the first ``python3`` on ``PATH``.
:func:`modelfleet.engines.tritonserver.server_environment` puts the running interpreter's ``bin`` first on
``PATH`` (and its libpython on ``LD_LIBRARY_PATH``), so the stub runs inside the same virtual environment and
sees its site-packages: installing ``modelfleet[serve]`` (onnxruntime, numpy) there is all that is needed.
In a container the same holds for the image's ``python3``; Triton's ``EXECUTION_ENV_PATH`` parameter (a
conda-pack tarball) is the alternative when the server's Python lacks the packages.

Runner behaviour: input names and dtypes come from the model config, outputs are cast to the config's
dtypes, cancelled requests get a ``CANCELLED`` error without running (the python backend does not drop them
by itself), and with ``max_batch_size > 0`` the requests of one ``execute`` call (a dynamic batch) are
concatenated along axis 0 into one onnxruntime call and split again. The onnxruntime backend's own config
parameter ``intra_op_thread_count`` (which the compiler sets on KIND_CPU instances: render/triton.py) sets
onnxruntime's thread count here too. String (BYTES) tensors are not supported.
"""

from __future__ import annotations

import shutil
from pathlib import Path

RUNNER_SOURCE = '''\
"""Triton python-backend model: run model.onnx next to this file with onnxruntime (written by modelfleet)."""
import json
import os

import numpy as np
import onnxruntime as ort
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        here = os.path.join(args["model_repository"], args["model_version"])
        options = ort.SessionOptions()
        threads = config.get("parameters", {}).get("intra_op_thread_count", {}).get("string_value")
        if threads:
            options.intra_op_num_threads = int(threads)
        self.session = ort.InferenceSession(os.path.join(here, "model.onnx"), sess_options=options,
                                            providers=["CPUExecutionProvider"])
        self.inputs = {t["name"]: pb_utils.triton_string_to_numpy(t["data_type"]) for t in config["input"]}
        self.outputs = {t["name"]: pb_utils.triton_string_to_numpy(t["data_type"]) for t in config["output"]}
        self.batching = config.get("max_batch_size", 0) > 0

    def execute(self, requests):
        responses = [None] * len(requests)
        live = []
        for i, request in enumerate(requests):
            if request.is_cancelled():
                responses[i] = pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("request cancelled", pb_utils.TritonError.CANCELLED))
            else:
                live.append(i)
        feeds = [self._feeds(requests[i]) for i in live]
        for i, outputs in zip(live, self._run_all(feeds)):
            responses[i] = self._response(outputs)
        return responses

    def _feeds(self, request):
        feeds = {}
        for name, dtype in self.inputs.items():
            tensor = pb_utils.get_input_tensor_by_name(request, name)
            feeds[name] = None if tensor is None else tensor.as_numpy().astype(dtype, copy=False)
        return feeds

    def _run_all(self, feeds):
        """One onnxruntime call for a whole dynamic batch when possible, else one per request."""
        if self.batching and len(feeds) > 1 and all(self._complete(f) for f in feeds):
            try:
                return self._run_batched(feeds)
            except Exception:
                pass  # e.g. ragged shapes: fall back to one call per request
        return [self._run(f) for f in feeds]

    def _run_batched(self, feeds):
        sizes = [len(next(iter(f.values()))) for f in feeds]
        merged = {name: np.concatenate([f[name] for f in feeds]) for name in self.inputs}
        results = self.session.run(list(self.outputs), merged)
        cuts = np.cumsum(sizes)[:-1]
        parts = [np.split(result, cuts) for result in results]
        return [[part[k] for part in parts] for k in range(len(feeds))]

    def _complete(self, feeds):
        return all(value is not None for value in feeds.values())

    def _run(self, feeds):
        missing = [name for name, value in feeds.items() if value is None]
        if missing:
            return pb_utils.TritonError("missing input(s): " + ", ".join(missing),
                                        pb_utils.TritonError.INVALID_ARG)
        try:
            return self.session.run(list(self.outputs), feeds)
        except Exception as error:
            return pb_utils.TritonError("onnxruntime: " + str(error))

    def _response(self, outputs):
        if isinstance(outputs, pb_utils.TritonError):
            return pb_utils.InferenceResponse(error=outputs)
        tensors = [pb_utils.Tensor(name, np.ascontiguousarray(value.astype(dtype, copy=False)))
                   for (name, dtype), value in zip(self.outputs.items(), outputs)]
        return pb_utils.InferenceResponse(output_tensors=tensors)

    def finalize(self):
        self.session = None
'''


def write_python_runner(model_dir: Path, onnx_model: Path | bytes, version: int = 1) -> Path:
    """Write ``<model_dir>/<version>/model.py`` (the runner) and a copy of the ONNX model next to it.

    ``onnx_model`` is a path to a ``.onnx`` file or its serialized bytes (``ModelProto.SerializeToString()``).
    The caller writes ``config.pbtxt`` (``backend: "python"``). Returns the version directory.
    """
    version_dir = Path(model_dir) / str(version)
    version_dir.mkdir(parents=True, exist_ok=True)
    target = version_dir / "model.onnx"
    if isinstance(onnx_model, bytes):
        target.write_bytes(onnx_model)
    else:
        shutil.copyfile(onnx_model, target)
    (version_dir / "model.py").write_text(RUNNER_SOURCE)
    return version_dir
