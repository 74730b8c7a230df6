"""Python-backend sources that let a CPU-only tritonserver serve a compiled repository unchanged.

Why python-based backends: Triton resolves ``backend: "onnxruntime"`` (or tensorrt, pytorch, ...) to
``backends/<name>/libtriton_<name>.so`` and, when that library is absent, to ``backends/<name>/model.py``
run by the python backend. Installing :data:`BACKEND_DISPATCHER` there under the missing backend's name keeps
every compiled ``config.pbtxt`` byte for byte (platform, backend, batching, queue policy, cache), instead of
rewriting it to ``backend: "python"``. The dispatcher then picks, per model version directory:

* ``model.onnx`` present: the ONNX runner of :mod:`modelfleet.engines.onnx_runner` (real inference through
  onnxruntime, dynamic batches merged into one call);
* otherwise ``synthetic.json`` present: :data:`SYNTHETIC_SOURCE`, a stand-in with the model's tensor
  signature that answers zeros and takes the plan's time (see there). ``modelfleet serve`` labels it.

Both implementations are written next to the dispatcher and loaded by path only when used, so a backend
directory that only serves stand-ins does not need onnxruntime installed.
"""

from __future__ import annotations

from ..engines.onnx_runner import RUNNER_SOURCE

SYNTHETIC_SETTINGS = "synthetic.json"
ONNX_RUNNER_FILE = "onnx_runner.py"
SYNTHETIC_FILE = "synthetic.py"

SYNTHETIC_SOURCE = '''\
"""SYNTHETIC stand-in written by `modelfleet serve`: not the real model, no real artifact was found locally.

Same tensors as the compiled config (outputs are zeros; strings are b"synthetic"), and the time the plan
assumes: a batch of n requests takes max(compute_ms, n / rps_per_instance), so it is never faster than the
plan in latency (one batch execution) or in throughput (one instance). Settings: synthetic.json.
"""
import json
import os
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        here = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(here, "synthetic.json")) as handle:
            settings = json.load(handle)
        self.compute_s = float(settings["compute_ms"]) / 1000.0
        self.rps = float(settings.get("rps_per_instance") or 0.0)
        self.batching = config.get("max_batch_size", 0) > 0
        self.first_input = config["input"][0]["name"]
        self.outputs = [(t["name"], pb_utils.triton_string_to_numpy(t["data_type"]),
                         [max(int(d), 1) for d in t["dims"]]) for t in config["output"]]

    def execute(self, requests):
        cancelled = [request.is_cancelled() for request in requests]
        rows = [0 if gone else self._rows(r) for r, gone in zip(requests, cancelled)]
        if not all(cancelled):
            time.sleep(max(self.compute_s, sum(rows) / self.rps if self.rps else 0.0))
        return [self._cancelled() if gone else self._response(n) for gone, n in zip(cancelled, rows)]

    def _cancelled(self):
        return pb_utils.InferenceResponse(
            error=pb_utils.TritonError("request cancelled", pb_utils.TritonError.CANCELLED))

    def _rows(self, request):
        if not self.batching:
            return 1
        return int(pb_utils.get_input_tensor_by_name(request, self.first_input).as_numpy().shape[0])

    def _response(self, rows):
        tensors = []
        for name, dtype, dims in self.outputs:
            shape = ([rows] if self.batching else []) + dims
            if dtype == np.object_:
                value = np.full(shape, b"synthetic", dtype=np.object_)
            else:
                value = np.zeros(shape, dtype=dtype)
            tensors.append(pb_utils.Tensor(name, value))
        return pb_utils.InferenceResponse(output_tensors=tensors)
'''

BACKEND_DISPATCHER = '''\
"""Python-based backend written by `modelfleet serve`: this tritonserver lacks the real backend of this name.

Per model version: model.onnx -> onnx_runner.py (real onnxruntime inference); else synthetic.py (stand-in).
"""
import importlib.util
import os


def _load(filename):
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), filename)
    spec = importlib.util.spec_from_file_location("modelfleet_" + filename[:-3], path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TritonPythonModel


class TritonPythonModel:
    def initialize(self, args):
        here = os.path.join(args["model_repository"], args["model_version"])
        runner = "%(onnx)s" if os.path.isfile(os.path.join(here, "model.onnx")) else "%(synthetic)s"
        self.model = _load(runner)()
        self.model.initialize(args)

    def execute(self, requests):
        return self.model.execute(requests)

    def finalize(self):
        finalize = getattr(self.model, "finalize", None)
        if finalize is not None:
            finalize()
''' % {"onnx": ONNX_RUNNER_FILE, "synthetic": SYNTHETIC_FILE}


def backend_files() -> dict[str, str]:
    """The files of one python-based backend directory (``backends/<name>/``)."""
    return {"model.py": BACKEND_DISPATCHER, ONNX_RUNNER_FILE: RUNNER_SOURCE, SYNTHETIC_FILE: SYNTHETIC_SOURCE}
