"""A pipeline with an LLM step, end to end on REAL engines: the compiled vLLM plan on the real vLLM (CPU build,
the tiny random Llama, as ``serve --llm`` adapts it) and the rendered Triton repository (python pre step -> the
generated LLM python step -> python post step, the ensemble) on the real CPU tritonserver.

What is changed from the rendered repository, and why: the pre/post steps get a trivial model.py (their
artifacts are S3 prefixes), GPU instance groups become CPU ones (no GPU here), and the LLM step's ``url``
parameter points at the local vLLM instead of the cluster Service (the override the python step documents);
its ``timeout_ms`` is raised for the answer case, since the plan's share is for a GPU and these 2 shared cores
are not one, and set to 1 ms in a copy of the pipeline, which must fail fast with the step's timeout error.
Cancellation is not proven here: a cancel of the step's request stopped vLLM's generation in some runs and
not in others (2026-11-28), so it is not claimed (docs/triton-features.md).

Runs in .ci/run's vLLM step (``.venv-vllm``). tritonserver and its python stubs come from the project's
``.venv`` (``MODELFLEET_TRITON_PYTHON`` names another interpreter): in vLLM's venv, numpy 2 breaks the 2.51
stub's BYTES tensors (engines/tritonserver.py).
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from modelfleet.commands.serve_llm import running_vllm
from modelfleet.engines.tritonserver import EngineUnavailable, LocalTritonServer, find_tritonserver
from modelfleet.plan.types import VllmModelPlan
from modelfleet.render.fleet import render_triton_repositories
from modelfleet.render.triton import parse_config, render_config
from tests.conftest import ROOT
from tests.engines.conftest import engine_unavailable
from tests.engines.local_vllm import LOOPBACK, require_vllm
from tests.plan.test_llm_pipelines import compile_text, fleet_text

pytestmark = pytest.mark.engine("vllm")

require_vllm()
TRITON_PYTHON = os.environ.get("MODELFLEET_TRITON_PYTHON") or str(ROOT / ".venv" / "bin" / "python")
try:
    TRITON = find_tritonserver(TRITON_PYTHON)
except EngineUnavailable as exc:
    engine_unavailable("vllm", f"{exc} (bash scripts/setup.sh makes the project's .venv, or set "
                               "MODELFLEET_TRITON_PYTHON)")

STEP_MODEL = '''\
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            values = pb_utils.get_input_tensor_by_name(request, "{input}").as_numpy()
            texts = [{expression} for v in values.reshape(-1)]
            data = np.array([t.encode() for t in texts], dtype=np.object_).reshape(values.shape)
            out.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("{output}", data)]))
        return out
'''
LATE = "late"  # the copy of the pipeline whose LLM step has 1 ms to answer


def _edit(path: Path, change) -> None:
    config = parse_config(path.read_text())
    change(config)
    path.write_text(render_config(config))


def _on_cpu(config) -> None:
    for group in config.instance_group:
        group.kind = group.KIND_CPU
        del group.gpus[:]


def _parameters(url: str, **values: int | str):
    def change(config) -> None:
        config.parameters["url"].string_value = url + "/v1/completions"
        for key, value in values.items():
            config.parameters[key].string_value = str(value)
    return change


def _copy_pipeline(target: Path, name: str, url: str, **values: int | str) -> None:
    """A copy of the ``ask`` ensemble named ``name`` whose LLM step (``<name>.chat``) has other parameters."""
    step = target / f"{name}.chat"
    (step / "1").mkdir(parents=True)
    (step / "1" / "model.py").write_bytes((target / "ask.chat" / "1" / "model.py").read_bytes())
    (step / "config.pbtxt").write_text((target / "ask.chat" / "config.pbtxt").read_text())
    _edit(step / "config.pbtxt", lambda c: (_parameters(url, **values)(c), setattr(c, "name", step.name)))
    (target / name / "1").mkdir(parents=True)
    (target / name / "config.pbtxt").write_text((target / "ask" / "config.pbtxt").read_text())

    def rename(config) -> None:
        config.name = name
        for each in config.ensemble_scheduling.step:
            each.model_name = each.model_name.replace("ask.", f"{name}.")
    _edit(target / name / "config.pbtxt", rename)


def local_repository(files: dict[str, bytes], target: Path, url: str) -> str:
    """The rendered server's repository with the local changes the module docstring lists; its server name."""
    server = next(path.split("/")[1] for path in files if path.endswith("/ask/config.pbtxt"))
    prefix = f"triton/{server}/"
    for path, content in files.items():
        if path.startswith(prefix) and not path.endswith("server.json"):
            (target / path[len(prefix):]).parent.mkdir(parents=True, exist_ok=True)
            (target / path[len(prefix):]).write_bytes(content)
    for name, (inp, out, expression) in {"pre": ("question", "prompt", "'hello ' + v.decode()"),
                                         "post": ("text", "answer", "v.decode()")}.items():
        (target / name / "1").mkdir(parents=True)
        (target / name / "1" / "model.py").write_text(STEP_MODEL.format(input=inp, output=out, expression=expression))
        _edit(target / name / "config.pbtxt", _on_cpu)

    _edit(target / "ask.chat" / "config.pbtxt", _parameters(url, timeout_ms=120_000))
    _copy_pipeline(target, LATE, url, timeout_ms=1)
    return server


def infer(base: str, model: str, question: str, timeout: float = 120) -> tuple[int, dict]:
    """POST one request to the KServe v2 REST endpoint: (HTTP status, JSON body)."""
    body = {"inputs": [{"name": "question", "datatype": "BYTES", "shape": [1, 1], "data": [question]}]}
    request = urllib.request.Request(f"{base}/v2/models/{model}/infer", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        with LOOPBACK.open(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    """(tritonserver, vLLM base URL): the compiled pipeline's repository served against the compiled LLM."""
    tmp = tmp_path_factory.mktemp("pipeline-llm")
    plan = compile_text(fleet_text())
    llm = next(m for m in plan.models if isinstance(m, VllmModelPlan) and m.name == "chat")
    files = render_triton_repositories(plan)
    started = time.monotonic()
    with running_vllm(llm, tmp / "vllm", sys.executable) as (vllm_url, _):
        print(f"vLLM healthy after {time.monotonic() - started:.1f} s")
        repository = tmp / "repository"
        local_repository(files, repository, vllm_url)
        models = ["pre", "post", "ask.chat", "ask", f"{LATE}.chat", LATE]
        started = time.monotonic()
        with LocalTritonServer(repository, ["--model-control-mode=none"], workdir=tmp / "triton", install=TRITON,
                               expected_models=models) as server:
            print(f"tritonserver ready after {time.monotonic() - started:.1f} s")
            yield server, vllm_url


def test_a_pipeline_with_an_llm_step_answers_on_real_triton_and_vllm(engines) -> None:
    server, _ = engines
    started = time.monotonic()
    status, answer = infer(server.http_url, "ask", "the model")
    took = time.monotonic() - started
    assert status == 200, answer
    text = answer["outputs"][0]["data"][0]
    assert answer["outputs"][0]["name"] == "answer" and isinstance(text, str) and text.strip(), answer
    print(f"pipeline answered in {took:.2f} s: {text!r}")


def test_an_llm_step_past_its_share_fails_in_bounded_time(engines) -> None:
    server, _ = engines
    started = time.monotonic()
    status, error = infer(server.http_url, LATE, "the model", timeout=30)
    took = time.monotonic() - started
    assert status != 200 and "did not answer within this step's 1 ms share" in error.get("error", ""), error
    assert took < 10, took  # the step's clock, not the LLM's answer, ended it
    print(f"1 ms LLM share failed in {took:.2f} s: {error['error']}")
    status, answer = infer(server.http_url, "ask", "hello")
    assert status == 200, answer  # and the server still answers
