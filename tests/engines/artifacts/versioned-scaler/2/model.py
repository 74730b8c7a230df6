"""versioned-scaler: a python-backend model served in two versions for the real-server version tests.

Version N multiplies its input by N (the folder it is loaded from, Triton's ``model_version`` argument): an
answer says which version computed it. Both folders hold this same file.
"""

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.factor = np.float32(int(args["model_version"]))

    def execute(self, requests):
        out = []
        for request in requests:
            if request.is_cancelled():
                out.append(pb_utils.InferenceResponse(
                    error=pb_utils.TritonError("request cancelled", pb_utils.TritonError.CANCELLED)))
                continue
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", (x * self.factor).astype(np.float32))]))
        return out
