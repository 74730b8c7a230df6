"""The generated LLM step (render/llm_step.py MODEL_PY) run in this process: Triton's python-backend module is
replaced by a stand-in that records responses, and the LLM by a local HTTP server that answers after a set
delay. The real engines run it in tests/engines/test_pipeline_llm.py (CI's vLLM step); this pins the parts
that must hold whatever the machine's speed: an answer after the share is late even when it arrived between
two looks at the clock, and ``extra_request`` is a JSON object that cannot replace the step's own fields."""

from __future__ import annotations

import json
import sys
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from modelfleet.render.llm_step import MODEL_PY


class _Error(Exception):
    CANCELLED = "cancelled"

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message, self.code = message, code


def _stub() -> types.ModuleType:
    pb = types.ModuleType("triton_python_backend_utils")
    pb.TritonError = _Error
    pb.TritonModelException = type("TritonModelException", (Exception,), {})
    pb.Tensor = lambda name, data: (name, data)
    pb.InferenceResponse = lambda output_tensors=None, error=None: {"outputs": output_tensors, "error": error}
    pb.get_input_tensor_by_name = lambda request, name: types.SimpleNamespace(as_numpy=lambda: request.prompts)
    return pb


@pytest.fixture
def step(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", _stub())
    module = types.ModuleType("llm_step_model")
    exec(compile(MODEL_PY, "model.py", "exec"), module.__dict__)
    return module


@pytest.fixture
def llm():
    """A completions endpoint that answers after ``delay_s``; it keeps the bodies it was sent."""
    state = {"delay_s": 0.0, "bodies": []}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            state["bodies"].append(body)
            time.sleep(state["delay_s"])
            data = json.dumps({"choices": [{"index": 0, "text": "fine"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    state["url"] = f"http://127.0.0.1:{server.server_address[1]}/v1/completions"
    yield state
    server.shutdown()
    server.server_close()


def _model(step, url: str, timeout_ms: int, extra: str = ""):
    parameters = {"url": url, "model": "chat", "max_tokens": "8", "timeout_ms": str(timeout_ms)}
    if extra:
        parameters["extra_request"] = extra
    model = step.TritonPythonModel()
    model.initialize({"model_config": json.dumps({"parameters": {k: {"string_value": v}
                                                                 for k, v in parameters.items()}})})
    return model


def _request():
    return types.SimpleNamespace(prompts=np.array([[b"hello"]], dtype=np.object_), is_cancelled=lambda: False)


def test_an_answer_within_the_share_is_returned_with_the_extra_fields_sent(step, llm):
    model = _model(step, llm["url"], 5_000, '{"ignore_eos": true, "temperature": 0.5}')
    (response,) = model.execute([_request()])
    assert response["error"] is None and response["outputs"][0][1].tolist() == [[b"fine"]]
    assert llm["bodies"] == [{"temperature": 0.5, "ignore_eos": True, "model": "chat", "prompt": ["hello"],
                              "max_tokens": 8}]


@pytest.mark.parametrize("delay_s", [0.0, 0.01, 0.3])
def test_an_answer_after_the_share_is_late_however_soon_it_came(step, llm, delay_s):
    """A 1 ms share: the local answer takes longer than that even at no delay, but can arrive before the step
    first looks at its clock (CI's vLLM answered a 1 ms step so, and the step returned the answer)."""
    llm["delay_s"] = delay_s
    started = time.monotonic()
    (response,) = _model(step, llm["url"], 1).execute([_request()])
    assert response["outputs"] is None and "did not answer within this step's 1 ms share" in response["error"].message
    assert time.monotonic() - started < 0.25  # the step's clock ended it, not the answer


@pytest.mark.parametrize("extra", ['["ignore_eos"]', "{", '{"max_tokens": 9}', '{"prompt": "x"}', '{"stream": true}'])
def test_extra_request_must_be_an_object_that_leaves_the_steps_fields_alone(step, llm, extra):
    with pytest.raises(Exception, match="extra_request"):
        _model(step, llm["url"], 5_000, extra)
