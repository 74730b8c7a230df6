"""Budgets and policies: every violation names the model (or stack), the rule, the figures and the fix."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from modelfleet.cli import main
from modelfleet.cost.policy import BUDGET_WARNING, check_budget, check_policies
from modelfleet.errors import CompileError
from modelfleet.project import Project
from tests.conftest import ROOT


def make_project(tmp_path: Path, stack: str, config: dict, models_text: str | None = None) -> Project:
    """A copy of the example with ``config`` merged over one stack's ``config:`` (None removes a key)."""
    tmp_path.mkdir(exist_ok=True)
    shutil.copy(ROOT / "models.yaml", tmp_path / "models.yaml")
    shutil.copytree(ROOT / "stacks", tmp_path / "stacks")
    shutil.copytree(ROOT / "samples", tmp_path / "samples")  # warmup samples models.yaml names
    if models_text is not None:
        (tmp_path / "models.yaml").write_text(models_text)
    path = tmp_path / "stacks" / f"Pulumi.{stack}.yaml"
    data = yaml.safe_load(path.read_text())
    for key, value in config.items():
        if value is None:
            data["config"].pop(key, None)
        else:
            data["config"][key] = value
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return Project(root=str(tmp_path))


def _env_with(project: Project, stack: str, **fields):
    env = project.environment(stack)
    return type(env).model_validate({**env.model_dump(), **fields})


# ---------------------------------------------------------------------------------------------- budget
def test_over_budget_fails_the_compile_with_the_figures(tmp_path):
    project = make_project(tmp_path, "prod", {"modelfleet:budget": {"monthlyUsd": 150000}})
    with pytest.raises(CompileError) as raised:
        project.plan("prod")
    (issue,) = raised.value.issues
    assert issue.file.endswith("stacks/Pulumi.prod.yaml") and issue.line > 0
    assert issue.path == "config.modelfleet:budget"
    # 216,207.53 - 150,000 = 66,207.53; the three dearest models at desired replicas (see test_figures)
    assert issue.message == ("prod: desired monthly cost 216,207.53 USD exceeds the budget of 150,000.00 USD (144%): "
                             "over by 66,207.53 USD; dearest models: llama-3-1-405b-instruct 160,780.80, "
                             "llama-3-3-70b-instruct 48,135.24, llama-3-1-8b-instruct 5,498.12")
    assert "raise modelfleet:budget.monthlyUsd" in issue.fix and "onExceed: warn" in issue.fix


def test_over_budget_only_warns_when_the_stack_says_so(tmp_path, capsys):
    project = make_project(tmp_path, "prod", {"modelfleet:budget": {"monthlyUsd": 150000, "onExceed": "warn"}})
    plan = project.plan("prod")
    (warning,) = [w for w in plan.warnings if w.model == BUDGET_WARNING]
    assert "exceeds the budget of 150,000.00 USD" in warning.message
    assert main(["--project", str(tmp_path), "plan", "--stack", "prod"]) == 0
    assert "warning: budget: prod: desired monthly cost 216,207.53 USD exceeds" in capsys.readouterr().err


def test_the_budget_basis_can_be_the_autoscaling_ceiling(tmp_path):
    project = make_project(tmp_path, "prod", {"modelfleet:budget": {"monthlyUsd": 250000, "basis": "max"}})
    status = project.costed("prod").budget
    assert status.over and status.monthly_usd == pytest.approx(431_040.52196)  # max replicas, see test_figures
    with pytest.raises(CompileError, match=r"max monthly cost 431,040.52 USD exceeds the budget of 250,000.00"):
        project.plan("prod")


def test_the_example_stacks_are_within_their_budgets(project):
    for stack in project.stacks():
        status = project.costed(stack).budget
        assert status is not None and not status.over, stack


def test_cost_exits_3_only_for_guardrails_that_would_fail_the_render(tmp_path, capsys):
    """`--fail-on budget` counts budgets in `fail` mode (over, or unknown) and never `warn` ones: exactly what
    makes `render` and `pulumi up` fail. The report is written either way."""
    make_project(tmp_path, "staging", {"modelfleet:budget": {"monthlyUsd": 100000, "onExceed": "warn"}})
    staging = ["--project", str(tmp_path), "cost", "--stack", "staging"]
    assert main(staging) == 0
    out = capsys.readouterr().out
    assert ("staging: desired monthly cost 135,817.13 USD exceeds the budget of 100,000.00 USD (136%) "
            "[OVER BUDGET: a warning only (onExceed: warn)]") in out
    assert main(staging + ["--fail-on", "budget,policy"]) == 0  # warn mode: render succeeds, so does CI
    make_project(tmp_path / "p", "prod", {"modelfleet:budget": {"monthlyUsd": 150000}})
    prod = ["--project", str(tmp_path / "p"), "cost", "--stack", "prod"]
    assert main(prod) == 0
    assert "[OVER BUDGET: the compile fails (onExceed: fail)]" in capsys.readouterr().out
    assert main(prod + ["--fail-on", "budget"]) == 3
    captured = capsys.readouterr()
    assert "prod: desired monthly cost 216,207.53 USD exceeds" in captured.out  # the report is still written
    assert "prod: budget: prod: desired monthly cost 216,207.53 USD exceeds the budget" in captured.err
    assert main(prod + ["--fail-on", "policy"]) == 0


def test_fail_on_policy(tmp_path, capsys):
    make_project(tmp_path, "prod", {"modelfleet:policies": {"maxGpusPerModel": 32}})
    argv = ["--project", str(tmp_path), "cost", "--stack", "prod"]
    assert main(argv + ["--fail-on", "budget"]) == 0
    assert main(argv + ["--fail-on", "policy"]) == 3
    assert "prod: policy: " in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(argv + ["--fail-on", "budgets"])  # argparse: use budget, policy
    assert "use a comma-separated list of budget, policy" in capsys.readouterr().err


def test_unknown_prices_say_cannot_check_not_over_budget(tmp_path, capsys):
    """Fails closed in `fail` mode, but is labelled for what it is."""
    make_project(tmp_path, "prod", {"aws:region": "eu-west-1"})
    argv = ["--project", str(tmp_path), "cost", "--stack", "prod"]
    assert main(argv + ["--fail-on", "budget"]) == 3
    captured = capsys.readouterr()
    assert ("the budget of 250,000.00 USD cannot be checked [cannot check (prices unknown): the compile fails "
            "(onExceed: fail)]") in captured.out
    assert "OVER" not in captured.out and "cannot be checked" in captured.err
    assert main(argv + ["--format", "markdown"]) == 0
    comment = capsys.readouterr().out
    assert "| ❌ cannot check (prices unknown) vs 250,000.00: the render fails |" in comment
    assert "— ❌ budget cannot be checked: prod" in comment.splitlines()[1]


def test_a_warn_budget_is_a_warning_in_the_comment(tmp_path, capsys):
    repo = make_project(tmp_path, "staging", {"modelfleet:budget": {"monthlyUsd": 100000, "onExceed": "warn"}})
    assert main(["--project", repo.root, "cost", "--format", "markdown"]) == 0
    comment = capsys.readouterr().out
    assert comment.splitlines()[1] == "### modelfleet cost preview — ⚠️ over budget (warn only): staging"
    assert "| ⚠️ 136% of 100,000.00 (desired) (onExceed: warn) |" in comment and "❌" not in comment


def test_a_budget_cannot_pass_on_unknown_prices(project, catalogue):
    from modelfleet.cost.fleet import compute_fleet_cost, estimate_llm_loads
    from modelfleet.plan.compiler import compile_fleet
    env = _env_with(project, "prod", region="eu-west-1")
    plan = compile_fleet(project.fleet(), env, catalogue)
    status = check_budget(compute_fleet_cost(plan, catalogue, env, estimate_llm_loads(project.fleet(), "prod")), env)
    assert status.unknown and not status.over and not status.passes and status.blocks
    assert status.verdict == "cannot check (prices unknown): the compile fails (onExceed: fail)"
    assert "monthly cost is unknown (unpriced instance types), so the budget of 250,000.00 USD cannot be checked" \
        in status.describe()
    with pytest.raises(CompileError, match="cannot be checked"):
        from modelfleet.cost.policy import compile_with_guardrails
        compile_with_guardrails(project.fleet(), env, catalogue)  # fails closed


# ---------------------------------------------------------------------------------------------- policies
def _violations(project, stack, **fields):
    env = _env_with(project, stack, **fields)
    costed = project.costed(stack)
    return check_policies(costed.plan, costed.cost, project.fleet(), env)


OLD_VLLM = {"image": "vllm/vllm-openai:v0.11.0"}  # a stack pinning a release that loads 16-bit before quantizing


def test_max_gpus_per_model(project):
    issues = _violations(project, "prod", vllm=OLD_VLLM, policies={"max_gpus_per_model": 32})
    # the 70B too: 5 replicas at max x 8 A100s = 40 GPUs
    (issue,) = [i for i in issues if "llama-3-1-405b-instruct" in i.message]
    assert {i.message.split(":")[0] for i in issues} == {"llama-3-1-405b-instruct", "llama-3-3-70b-instruct"}
    assert issue.path == "models[7]"  # llama-3-1-405b-instruct, 8th in models.yaml
    assert issue.message == ("llama-3-1-405b-instruct: holds 48 GPUs at max replicas (3 x 16 NVIDIA H100); "
                             "policy maxGpusPerModel of prod is 32")
    assert issue.fix == (
        "lower the peak load or overrides.replicas, serve a pre-quantized checkpoint (size.dtype: int4 with "
        "quantization: awq_marlin or gptq_marlin, or size.dtype: fp8 with quantization: fp8 on L4, L40S, H100 or "
        "H200) for fewer GPUs per replica; size.dtype: fp8 alone would not: it still loads the 16-bit weights onto "
        "the GPUs before quantizing them (vllm/vllm-openai:v0.11.0), lower modelfleet:replicas.maxScaleFactor, or "
        "raise the policy")


def _405b_as(project, env, catalogue, **changes):
    """The 405B recompiled with ``changes`` to its spec: what the policy's advice would give."""
    from modelfleet.plan.compiler import compile_fleet
    fleet = project.fleet()
    models = tuple(m.model_copy(update={k: (m.size.model_copy(update=v) if k == "size" else v)
                                        for k, v in changes.items()})
                   if m.name == "llama-3-1-405b-instruct" else m for m in fleet.models)
    model = compile_fleet(fleet.model_copy(update={"models": models}), env, catalogue).model("llama-3-1-405b-instruct")
    return model.gpus_per_replica * model.max_replicas


def test_the_quantisation_advice_is_what_the_compiler_would_do(project, catalogue):
    """The old advice, size.dtype: fp8, leaves the 405B at 48 GPUs: vLLM 0.11 quantizes online only after loading
    the 16-bit weights, so each GPU must hold its share of them. A pre-quantized fp8 checkpoint halves it."""
    env = _env_with(project, "prod", vllm=OLD_VLLM)
    assert _405b_as(project, env, catalogue) == 48  # 3 x 16 H100
    assert _405b_as(project, env, catalogue, size={"dtype": "fp8"}) == 48  # the old advice: no change
    assert _405b_as(project, env, catalogue, size={"dtype": "fp8"}, quantization="fp8") == 24  # 3 x 8: within 32
    layerwise = _env_with(project, "prod", vllm={"image": "vllm/vllm-openai:v0.32.0"})
    assert _405b_as(project, layerwise, catalogue, size={"dtype": "fp8"}) == 24  # loads layer by layer there
    costed = project.costed("prod")
    (issue,) = [i for i in check_policies(costed.plan, costed.cost, project.fleet(),
                                          _env_with(project, "prod", vllm={"image": "vllm/vllm-openai:v0.32.0"},
                                                    policies={"max_gpus_per_model": 32}))
                if "llama-3-1-405b-instruct" in i.message]
    assert ("for fewer GPUs per replica, or size.dtype: fp8 alone (this vLLM release quantizes the 16-bit "
            "checkpoint layer by layer)") in issue.fix


def test_no_quantisation_advice_where_it_cannot_lower_the_gpus(project):
    prod = {i.message.split(":")[0]: i.fix for i in _violations(project, "prod", policies={"max_gpus_per_model": 1})}
    assert "fraud-scorer" not in prod  # KIND_CPU in prod: it holds no GPU
    # prod's 8B: 1 GPU per replica, 4 replicas for its p99 TPOT (above its floor of 2): faster decoding from a
    # pre-quantized checkpoint runs more sequences per replica, so fewer replicas
    assert "serve a pre-quantized checkpoint" in prod["llama-3-1-8b-instruct"]
    for name in ("image-preprocessor", "resnet50-classifier", "text-embedder"):
        # Triton serves the artifact as it is (and these are measured): nothing else to suggest either
        assert prod[name] == ("lower the peak load or overrides.replicas, lower modelfleet:replicas.maxScaleFactor, "
                              "or raise the policy")
    # the 70B (8 GPUs a replica): a smaller checkpoint needs fewer of them (0.32 quantizes layer by layer)
    assert "for fewer GPUs per replica, or size.dtype: fp8 alone (this vLLM release" in prod["llama-3-3-70b-instruct"]
    dev = {i.message.split(":")[0]: i.fix for i in _violations(project, "dev", policies={
        "max_monthly_usd_per_model": 100})}
    # dev's 8B: one GPU, one replica (singleReplica): a smaller checkpoint can lower neither
    assert dev["llama-3-1-8b-instruct"] == "lower the peak load or the replicas, or raise the policy"


def test_an_unmeasured_classic_model_is_told_to_measure(tmp_path):
    from tests.hardening.known_defects import classic
    project = make_project(tmp_path, "prod", {}, classic(rps="3000", profile=""))
    costed = project.costed("prod")
    env = _env_with(project, "prod", policies={"max_gpus_per_model": 1})
    (issue,) = check_policies(costed.plan, costed.cost, project.fleet(), env)
    assert issue.fix == ("lower the peak load or overrides.replicas, measure it on its GPU (`modelfleet profile "
                         "--url URL`, or perf_analyzer into profile.*): unmeasured, the compiler assumed half-full "
                         "batches within an execution budget, lower modelfleet:replicas.maxScaleFactor, or raise "
                         "the policy")


def test_allowed_families(project):
    issues = _violations(project, "prod", policies={"allowed_families": ["g5", "g6", "g6e", "c7i"]})
    assert len(issues) == 2 and "llama-3-3-70b-instruct: runs on p4d.24xlarge" in issues[1].message
    issue = issues[0]
    assert issue.message == ("llama-3-1-405b-instruct: runs on p5.48xlarge; policy allowedFamilies of prod is "
                             "g5, g6, g6e, c7i")
    assert issue.fix.startswith("drop p5 from modelfleet:instanceFamilies so the compiler picks an allowed family")
    assert "environments: {prod: {enabled: false}}" in issue.fix


def test_a_cpu_family_is_allowed_per_stack_like_a_gpu_family(project):
    """KIND_CPU models run on a CPU family the stack's policy must allow, like any GPU family."""
    issues = _violations(project, "prod", policies={"allowed_families": ["g5", "g6e", "p5", "m7i"]})
    (issue,) = [i for i in issues if i.message.startswith("fraud-scorer")]
    assert issue.message == "fraud-scorer: runs on c7i.xlarge; policy allowedFamilies of prod is g5, g6e, p5, m7i"
    assert issue.fix.startswith("drop c7i from modelfleet:instanceFamilies so the compiler picks an allowed family")


def test_max_monthly_usd_per_model(project):
    (issue,) = _violations(project, "prod", policies={"max_monthly_usd_per_model": 100000})
    assert issue.message == ("llama-3-1-405b-instruct: costs 160,780.80 USD/month at desired replicas; policy "
                             "maxMonthlyUsdPerModel of prod is 100,000.00")


def test_every_violation_is_reported_at_once(project):
    issues = _violations(project, "prod", policies={"max_gpus_per_model": 8, "allowed_families": ["g5", "p5", "c7i"]})
    messages = sorted(i.message.split(":")[0] + ": " + i.message.split("; policy ")[1].split(" ")[0] for i in issues)
    assert messages == ["llama-3-1-405b-instruct: maxGpusPerModel", "llama-3-1-8b-instruct: allowedFamilies",
                        "llama-3-3-70b-instruct: allowedFamilies", "llama-3-3-70b-instruct: maxGpusPerModel"]


PINNED_P5 = "        overrides: {instance_type: p5.48xlarge}\n"


def test_no_on_demand_p5_in_dev_fails_at_the_models_line(tmp_path, capsys):
    dev_patch = "        sla: {p99_ttft_ms: 10000, p99_tpot_ms: 150}\n"  # the 70B's
    text = (ROOT / "models.yaml").read_text()
    assert text.count(dev_patch) == 1
    text = text.replace(dev_patch, dev_patch + PINNED_P5)
    make_project(tmp_path, "dev", {"modelfleet:capacityType": "on-demand",
                                   "modelfleet:instanceFamilies": ["g4dn", "g5", "g6", "g6e", "p5"]}, text)
    assert main(["--project", str(tmp_path), "plan", "--stack", "dev"]) == 2
    err = capsys.readouterr().err
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "name: llama-3-3-70b-instruct" in row)
    assert (f"models.yaml:{line}:5: models[6]: llama-3-3-70b-instruct: runs on on-demand p5.48xlarge; policy forbid: "
            "no on-demand p4d/p4de/p5/p5en in dev (on-demand A100/H100/H200 capacity is reserved for production) "
            "(use spot capacity (modelfleet:capacityType: spot), pin overrides.instance_type to an allowed type, "
            "or disable the model here (environments: {dev: {enabled: false}}))") in err
    assert main(["--project", str(tmp_path), "cost", "--stack", "dev"]) == 0  # the preview still shows it
    assert "POLICY: " in capsys.readouterr().out


def test_cli_reports_budget_failures_on_one_line_each(tmp_path):
    make_project(tmp_path, "prod", {"modelfleet:budget": {"monthlyUsd": 1000}})
    result = subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(tmp_path), "render",
                             "--stack", "prod", "--out", str(tmp_path / "out")], capture_output=True, text=True,
                            cwd=ROOT)
    assert result.returncode == 2
    assert "Pulumi.prod.yaml:" in result.stderr and "exceeds the budget of 1,000.00 USD" in result.stderr
    assert not (tmp_path / "out").exists()


def test_the_pulumi_program_gets_the_same_guardrails_without_files(project, catalogue):
    from modelfleet.cost.policy import compile_with_guardrails
    env = _env_with(project, "prod", budget={"monthly_usd": 100000})
    with pytest.raises(CompileError, match="prod: desired monthly cost 216,207.53 USD exceeds the budget"):
        compile_with_guardrails(project.fleet(), env, catalogue)
    plan, cost = compile_with_guardrails(project.fleet(), project.environment("prod"), catalogue)
    assert cost.monthly_usd.desired == pytest.approx(216_207.52598) and plan.environment == "prod"
