"""Pipelines with an LLM step: accepted and refused with located errors, the p99 split (the LLM's predicted
TTFT + (max_output_tokens - 1) x TPOT first, the classic steps the rest), and the rendered python step."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelfleet.errors import CompileError, SpecError
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.load import parse_fleet_text

DEV = EnvironmentSpec.model_validate({"name": "dev", "region": "us-east-1", "namespace": "ml",
                                      "instance_families": ("g5", "g6", "c7i")})
STEP = """\
  - name: {name}
    type: other
    framework: python
    artifact: s3://bucket/{name}
    size: {{memory_gib: 0.1}}
    inputs: [{{name: {input}, dtype: string, dims: [1]}}]
    outputs: [{{name: {output}, dtype: string, dims: [1]}}]
    sla: {{p99_latency_ms: 100, peak_rps: 1}}
    profile: {{rps_per_instance: 1000, compute_ms: 2, measured_on: a10g}}
"""
LLM = """\
  - name: chat
    type: llm
    artifact: meta-llama/Llama-3.1-8B-Instruct
    size: {dtype: bf16}
    architecture: llama-3.1-8b
    sla: {max_context_tokens: 4096, avg_input_tokens: 500, avg_output_tokens: 100, peak_requests_per_s: 2,
          p99_ttft_ms: 1500, p99_tpot_ms: 50}
"""
PIPELINE = """\
pipelines:
  - name: ask
    inputs: [{name: question, dtype: string, dims: [1]}]
    outputs: [{name: answer, dtype: string, dims: [1], from: post.answer}]
    steps:
      - model: pre
        inputs: {question: question}
      - model: chat
        inputs: {prompt: pre.prompt}
        max_output_tokens: 32
      - model: post
        inputs: {text: chat.text}
    sla: {p99_latency_ms: P99, peak_rps: 4}
"""


def fleet_text(p99: int = 10000, replace: tuple[str, str] = ("", "")) -> str:
    text = (PIPELINE.replace("P99", str(p99)) + "models:\n" + STEP.format(name="pre", input="question", output="prompt")
            + LLM + STEP.format(name="post", input="text", output="answer"))
    return text.replace(*replace) if replace[0] else text


def compile_text(text: str):
    fleet = parse_fleet_text(text, "models.yaml", known_environments=("dev",))
    return compile_fleet(fleet, DEV, load_instance_catalogue())


def issues_of(text: str):
    with pytest.raises(SpecError) as caught:
        parse_fleet_text(text, "models.yaml", known_environments=("dev",))
    return caught.value.issues


# (id, (old, new) edit of the document, "line:col", path, words of the message, words of the fix)
REFUSED = [
    ("prompt-not-a-string", ("outputs: [{name: prompt, dtype: string", "outputs: [{name: prompt, dtype: fp32"),
     "9:18", "pipelines[0].steps[1].inputs.prompt", "pre.prompt is fp32 [1], but chat's input prompt is string [1]",
     "same dtype"),
    ("text-into-a-number", ("inputs: [{name: text, dtype: string", "inputs: [{name: text, dtype: int64"),
     "12:18", "pipelines[0].steps[2].inputs.text", "chat.text is string [1], but post's input text is int64 [1]",
     "same dtype"),
    ("no-prompt", ("inputs: {prompt: pre.prompt}", "inputs: {question: pre.prompt}"), "9:18",
     "pipelines[0].steps[1].inputs.question", "chat has no input 'question'", "prompt"),
    ("unknown-llm", ("      - model: chat\n", "      - model: chatt\n"), "8:9", "pipelines[0].steps[1].model",
     "no model named 'chatt'", "did you mean `chat`?"),
    ("tokens-on-a-classic-step", ("        inputs: {text: chat.text}", "        inputs: {text: chat.text}\n"
                                  "        max_output_tokens: 4"), "13:9", "pipelines[0].steps[2].max_output_tokens",
     "post is not an LLM", "remove it"),
    ("tokens-past-the-context", ("max_output_tokens: 32", "max_output_tokens: 4096"), "10:9",
     "pipelines[0].steps[1].max_output_tokens", "leave no room for a prompt in chat's max_context_tokens 4096",
     "fewer than 4096"),
    ("version-on-an-llm-step", ("max_output_tokens: 32", "max_output_tokens: 32\n        version: 2"), "11:9",
     "pipelines[0].steps[1].version", "chat is an LLM: vLLM serves one version", "remove the step's version"),
    ("llm-disabled-where-the-pipeline-runs", ("          p99_ttft_ms: 1500, p99_tpot_ms: 50}",
                                              "          p99_ttft_ms: 1500, p99_tpot_ms: 50}\n"
                                              "    environments: {dev: {enabled: false}}"),
     "8:9", "pipelines[0].steps[1].model", "chat is disabled in stack dev", "disable the pipeline there too"),
]


@pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
def test_a_bad_llm_step_is_a_located_error_with_its_fix(case) -> None:
    _, replace, position, path, message, fix = case
    issues = issues_of(fleet_text(replace=replace))
    found = [i for i in issues if i.path == path]
    assert found, [(i.path, i.message) for i in issues]
    issue = found[0]
    assert f"{issue.line}:{issue.column}" == position and issue.file == "models.yaml"
    assert message in issue.message and fix in issue.fix, (issue.message, issue.fix)


def test_a_pipeline_of_llm_steps_only_is_refused() -> None:
    text = fleet_text(replace=("      - model: pre\n        inputs: {question: question}\n", "")).replace(
        "{prompt: pre.prompt}", "{prompt: question}").replace(
        "      - model: post\n        inputs: {text: chat.text}\n", "").replace("from: post.answer", "from: chat.text")
    issues = issues_of(text)
    assert [i.path for i in issues] == ["pipelines[0].steps"]
    assert "every step is an LLM" in issues[0].message and "call the LLM directly" in issues[0].fix


def test_the_llm_takes_its_predicted_time_and_the_classic_steps_split_the_rest() -> None:
    plan = compile_text(fleet_text())
    pipeline = plan.pipelines[0]
    llm = next(m for m in plan.models if m.name == "chat")
    (step,) = pipeline.llm_steps
    ttft, tpot = llm.estimates.ttft_p99_ms, llm.estimates.tpot_p99_ms or llm.estimates.tpot_ms
    assert (step.ttft_p99_ms, step.tpot_ms, step.max_output_tokens) == (ttft, tpot, 32)
    assert step.timeout_ms == -(-(ttft + 31 * tpot) // 1)  # TTFT + (tokens - 1) x TPOT, rounded up
    assert step.url == "http://chat.ml.svc:8000/v1/completions" and step.name == "ask.chat"
    assert [s.model for s in pipeline.steps] == ["pre", "ask.chat", "post"]
    shares = {s.model: s.budget_ms for s in pipeline.steps}
    assert shares["ask.chat"] == step.timeout_ms
    assert shares["pre"] + shares["post"] == pytest.approx(10000 - step.timeout_ms, abs=0.1)
    assert pipeline.p99_latency_ms == 10000
    assert step.instances == -(-4 * step.timeout_ms // 1000)  # peak 4 req/s x the share in flight
    assert any("LLM steps" in d.choice for d in pipeline.decisions)


def test_the_declared_output_length_defaults_to_the_llms_own() -> None:
    plan = compile_text(fleet_text(replace=("        max_output_tokens: 32\n", "")))
    assert plan.pipelines[0].llm_steps[0].max_output_tokens == 100  # the LLM's sla.avg_output_tokens


def test_a_p99_the_llm_alone_exceeds_is_a_located_error_naming_the_fix() -> None:
    with pytest.raises(CompileError) as caught:
        compile_text(fleet_text(p99=500))
    (issue,) = [i for i in caught.value.issues if i.path == "pipelines[0].sla.p99_latency_ms"]
    assert "less than its LLM step(s) take alone: chat" in issue.message
    assert "raise it above" in issue.fix and "max_output_tokens" in issue.fix


def test_the_rendered_llm_step_is_byte_identical_to_its_golden_and_compiles(tmp_path) -> None:
    from modelfleet.render.fleet import render_triton_repositories
    from tests.conftest import update_golden

    files = render_triton_repositories(compile_text(fleet_text()))
    again = render_triton_repositories(compile_text(fleet_text()))
    assert files == again
    golden = Path(__file__).parent / "golden" / "llm_step"
    mine = {k.split("/", 2)[2]: v for k, v in files.items() if "/ask" in k}
    assert sorted(mine) == ["ask.chat/1/model.py", "ask.chat/config.pbtxt", "ask/1/README.txt", "ask/config.pbtxt"]
    for name, content in mine.items():
        path = golden / name
        if update_golden():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)
        assert path.read_bytes() == content, f"{name} changed: MODELFLEET_UPDATE_GOLDEN=1 and review the diff"
    compile(mine["ask.chat/1/model.py"], "model.py", "exec")


def _llm_step_module(monkeypatch):
    """The generated model.py, imported with a stand-in for Triton's triton_python_backend_utils."""
    import json as _json
    import types

    from modelfleet.render.llm_step import MODEL_PY

    utils = types.ModuleType("triton_python_backend_utils")
    utils.TritonModelException = type("TritonModelException", (Exception,), {})
    monkeypatch.setitem(__import__("sys").modules, "triton_python_backend_utils", utils)
    module = types.ModuleType("llm_step_model")
    exec(compile(MODEL_PY, "model.py", "exec"), module.__dict__)

    def load(**parameters: str):
        config = {"parameters": {k: {"string_value": v} for k, v in parameters.items()}}
        model = module.TritonPythonModel()
        model.initialize({"model_config": _json.dumps(config)})
        return model
    return utils, load


GOOD = {"url": "http://chat.ml.svc:8000/v1/completions", "model": "chat", "max_tokens": "32", "timeout_ms": "1529"}


@pytest.mark.parametrize("change, words", [
    ({"url": "https://chat.ml.svc/v1/completions"}, "must be http://HOST:PORT/v1/completions"),
    ({"url": "http://chat.ml.svc:8000/v1/chat"}, "must be http://HOST:PORT/v1/completions"),
    ({"url": "http:///v1/completions"}, "must be http://HOST:PORT/v1/completions"),
    ({"timeout_ms": "0"}, "'timeout_ms' must be a positive integer"),
    ({"max_tokens": "many"}, "'max_tokens' must be a positive integer"),
    ({"model": ""}, "parameter 'model' is missing"),
])
def test_the_llm_step_refuses_bad_parameters_when_it_loads(monkeypatch, change, words) -> None:
    utils, load = _llm_step_module(monkeypatch)
    model = load(**GOOD)
    assert (model.host, model.port, model.path, model.timeout_s) == ("chat.ml.svc", 8000, "/v1/completions", 1.529)
    with pytest.raises(utils.TritonModelException, match=words.replace("(", r"\(")):
        load(**{**GOOD, **change})


@pytest.mark.parametrize("framework", ["python", "onnx"])
def test_the_llm_steps_python_stubs_are_counted_on_their_server(framework) -> None:
    from modelfleet.plan.triton.packing.gpu import PYTHON_SHM_BYTES

    plan = compile_text(fleet_text(replace=("framework: python", f"framework: {framework}")))
    (server,) = plan.triton_servers
    (step,) = plan.pipelines[0].llm_steps
    classic_stubs = sum(m.instance_count for m in plan.models if getattr(m, "backend", "") == "python")
    assert server.python_shm_bytes == PYTHON_SHM_BYTES * (classic_stubs + step.instances)
    flag = f"--backend-config=python,shm-default-byte-size={PYTHON_SHM_BYTES}"
    assert server.args.count(flag) == 1
    assert server.args.index(flag) == server.args.index("--allow-metrics=true") + 1 + any(
        a.startswith("--cache-config=") for a in server.args)
