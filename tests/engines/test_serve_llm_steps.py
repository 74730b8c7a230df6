"""``modelfleet serve`` with a pipeline whose step is an LLM: left out with a note saying how to serve it unless
``--llm-url LLM=URL`` says where the LLM answers here; then the ensemble and the generated LLM step are served
as rendered, the step's ``url`` the local one. Pure checks of the planned repository, the flag's errors, and
one run on the real tritonserver with a stand-in completions endpoint (the real vLLM end to end is
tests/engines/test_pipeline_llm.py, in CI's vLLM step)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from modelfleet.commands.serve import llm_urls
from modelfleet.errors import CompileError
from modelfleet.render.llm_step import MODEL_PY
from modelfleet.render.triton import parse_config
from modelfleet.serve import plan_local_repository, write_local_repository
from tests.plan.test_llm_pipelines import compile_text, fleet_text

PYTHON_ONLY = frozenset({"python"})
URL = "http://127.0.0.1:9/v1/completions"


@pytest.fixture(scope="module")
def plan():
    return compile_text(fleet_text())


def test_a_pipeline_with_an_llm_step_is_left_out_with_how_to_serve_it(plan, tmp_path: Path) -> None:
    local = plan_local_repository(plan, tmp_path, PYTHON_ONLY)
    names = {m.name for m in local.models}
    assert {"pre", "post"} <= names and "ask" not in names and "ask.chat" not in names
    (note,) = [a for a in local.adaptations if a.startswith("pipeline ask left out")]
    assert "modelfleet serve --llm chat" in note and "--llm-url chat=http://127.0.0.1:PORT/v1/completions" in note


def test_with_the_llms_url_the_ensemble_and_its_step_are_served_as_rendered(plan, tmp_path: Path) -> None:
    local = plan_local_repository(plan, tmp_path, PYTHON_ONLY, llm_urls={"chat": URL})
    by_name = {m.name: m for m in local.models}
    assert {"ask", "ask.chat", "pre", "post"} <= set(by_name)
    assert not [a for a in local.adaptations if "left out" in a]
    step = plan.pipeline("ask").llm_steps[0]
    written = write_local_repository(local, tmp_path / "repository", tmp_path / "backends")
    config = parse_config((written / "ask.chat" / "config.pbtxt").read_text())
    params = {k: v.string_value for k, v in config.parameters.items()}
    assert params == {"url": URL, "model": "chat", "max_tokens": str(step.max_output_tokens),
                      "timeout_ms": str(step.timeout_ms)}
    assert (written / "ask.chat" / "1" / "model.py").read_text() == MODEL_PY
    assert sorted(p.name for p in (written / "ask.chat").iterdir()) == ["1", "config.pbtxt"]
    assert (written / "ask" / "1").is_dir()  # the ensemble's empty version folder


@pytest.mark.parametrize(("pairs", "message"), [
    (["chat"], "'chat' is not LLM=URL"),
    (["chat=" + URL, "chat=" + URL], "chat is given twice"),
])
def test_malformed_llm_urls_are_errors(pairs: list[str], message: str) -> None:
    with pytest.raises(CompileError, match=message):
        llm_urls(pairs)


@pytest.mark.parametrize(("urls", "message"), [
    ({"other": URL}, "no pipeline step of stack dev calls an LLM named 'other'"),
    ({"chat": "https://host/v1/completions"}, "is not an http URL of a completions endpoint"),
    ({"chat": "http://127.0.0.1:8000/v1/chat/completions"}, "is not an http URL of a completions endpoint"),
])
def test_an_llm_url_must_name_a_called_llm_and_its_completions_endpoint(plan, tmp_path, urls, message) -> None:
    with pytest.raises(CompileError, match=message):
        plan_local_repository(plan, tmp_path, PYTHON_ONLY, llm_urls=urls)


class _Completions(BaseHTTPRequestHandler):
    """A stand-in OpenAI completions endpoint: answers each prompt with its length, and keeps every body."""

    bodies: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).bodies.append(body)
        answer = json.dumps({"choices": [{"index": i, "text": f"answer to {len(p)} chars"}
                                         for i, p in enumerate(body["prompt"])]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def completions() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Completions)
    _Completions.bodies = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1/completions"
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.engine
def test_the_served_pipeline_answers_through_its_llm_step(plan, completions: str, tmp_path: Path) -> None:
    """On the real tritonserver: the ensemble (synthetic pre and post stand-ins, the generated LLM step) loads
    and answers, and the step asked the local endpoint as compiled (the LLM's name, max_tokens)."""
    from tests.engines.conftest import engine_import, require_tritonserver

    require_tritonserver()
    np = engine_import("triton", "numpy")
    httpclient = engine_import("triton", "tritonclient.http")
    from modelfleet.commands.serve import available_backends
    from modelfleet.engines.tritonserver import LocalTritonServer, find_tritonserver, prepare_backends

    install = find_tritonserver()
    local = plan_local_repository(plan, tmp_path / "artifacts", available_backends(install),
                                  llm_urls={"chat": completions})
    backends = prepare_backends(install, tmp_path / "work")
    repository = write_local_repository(local, tmp_path / "repository", backends)
    models = [m.name for m in local.models]
    with LocalTritonServer(repository, local.server_args, workdir=tmp_path / "run", install=install,
                           backends=backends, expected_models=models) as server:
        client = httpclient.InferenceServerClient(server.http_url.removeprefix("http://"))
        try:
            question = httpclient.InferInput("question", [1, 1], "BYTES")
            question.set_data_from_numpy(np.array([[b"what is packed?"]], dtype=np.object_))
            result = client.infer("ask", [question])
        finally:
            client.close()
    assert result.as_numpy("answer").shape == (1, 1)
    step = plan.pipeline("ask").llm_steps[0]
    assert _Completions.bodies and all(b["model"] == "chat" and b["max_tokens"] == step.max_output_tokens
                                       for b in _Completions.bodies)
