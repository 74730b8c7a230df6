"""token-streamer: a decoupled (streaming) python-backend model for the real-server tests.

Each request asks for ``count`` tokens; the model sends one response per token (0, 1, ..., count - 1), a few
milliseconds apart as a generator would, then the final flag. Cancelled requests stop early.
"""

import time

import numpy as np
import triton_python_backend_utils as pb_utils

TOKEN_INTERVAL_S = 0.005


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            count = int(pb_utils.get_input_tensor_by_name(request, "count").as_numpy().reshape(-1)[0])
            for token in range(count):
                if request.is_cancelled():
                    break
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("token", np.array([[token]], np.int32))]))
                time.sleep(TOKEN_INTERVAL_S)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
