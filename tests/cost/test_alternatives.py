"""Cheaper alternatives named by every plan, precision: auto, plan --model, the published-dtype warning, the Hub
gating and validate --online (with an injected Hub)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelfleet.commands.validate import check_hub
from modelfleet.cost.alone import price_alone
from modelfleet.cost.alternatives import alternatives_of, find_alternatives, misses
from modelfleet.cost.dtype_check import dtype_warnings
from modelfleet.deploy import compile_deploy_plan
from modelfleet.deploy.checks import credential_issues
from modelfleet.engines.hub_client import NotFound
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.llm.precision import weights_changes
from modelfleet.project import Project
from modelfleet.spec.hub_check import HubFacts, hub_differences, hub_targets
from modelfleet.spec.load import with_fields
from modelfleet.spec.models import FleetSpec, LlmModelSpec
from modelfleet.spec.presets import LLM_PRESETS
from tests.components.mocked import stack_config
from tests.conftest import ROOT
from tests.cost.fleets import ENVIRONMENTS
from tests.cost.test_explore import example


def llm(name: str = "m", preset: str = "qwen2.5-7b", **extra) -> LlmModelSpec:
    data = {"name": name, "type": "llm", "artifact": LLM_PRESETS[preset].repo, "size": {"dtype": "bf16"},
            "architecture": preset, "sla": {"max_context_tokens": 4096, "avg_input_tokens": 1500,
                                            "avg_output_tokens": 300, "peak_concurrent_sequences": 40,
                                            "p99_ttft_ms": 800, "p99_tpot_ms": 60}}
    for key, value in extra.items():
        data[key] = {**data[key], **value} if isinstance(value, dict) and key in data else value
    return LlmModelSpec.model_validate(data)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(preset=st.sampled_from(("qwen2.5-7b", "llama-3.1-8b", "qwen2.5-14b", "mistral-7b", "llama-3.3-70b")),
       ttft=st.sampled_from((400, 800, 2000, 8000)), seqs=st.integers(1, 120), env=st.sampled_from(ENVIRONMENTS))
def test_fp8_is_named_with_its_saving_wherever_it_is_cheaper_at_the_same_sla(preset, ttft, seqs, env):
    _, catalogue, _ = example()
    model = llm(preset=preset, sla={"p99_ttft_ms": ttft, "peak_concurrent_sequences": seqs})
    at_fp8 = with_fields(model, weights_changes(model, "fp8"))
    declared, fp8 = price_alone(model, env, catalogue), price_alone(at_fp8, env, catalogue)
    named = [a for a in alternatives_of(model, env, catalogue) if a.changes == weights_changes(model, "fp8")]
    cheaper = (declared is not None and fp8 is not None and declared.monthly_usd - fp8.monthly_usd >= 1.0
               and not misses(at_fp8, fp8.planned))  # a single replica that misses the SLA is no alternative
    assert bool(named) == cheaper, (declared and declared.monthly_usd, fp8 and fp8.monthly_usd, named)
    if named:
        assert named[0].monthly_saving_usd == round(declared.monthly_usd - fp8.monthly_usd, 2)
        assert "owner's call" in named[0].note


def test_precision_auto_picks_the_cheapest_and_says_why():
    fleet, catalogue, envs = example()
    env = envs["prod"]
    model = with_fields(fleet.model("llama-3-1-8b-instruct"), (("sla.p99_ttft_ms", 800),))
    bf16 = price_alone(model, env, catalogue)
    fp8 = price_alone(with_fields(model, weights_changes(model, "fp8")), env, catalogue)
    auto = price_alone(with_fields(model, (("precision", "auto"),)), env, catalogue)
    assert fp8.monthly_usd < bf16.monthly_usd, "the issue's case: fp8 saves a replica at 800 ms"
    assert auto.monthly_usd == fp8.monthly_usd and auto.planned.dtype == "fp8"
    assert any(d.choice.startswith("precision fp8") for d in auto.planned.decisions)
    only_own = price_alone(with_fields(model, (("precision", ("bf16",)),)), env, catalogue)
    assert only_own.monthly_usd == bf16.monthly_usd and only_own.planned.dtype == "bf16"
    with pytest.raises(ValueError, match="can be served at bf16 or fp8 only"):
        with_fields(model, (("precision", ("int4",)),))


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelfleet", "--project", str(ROOT), *args],
                          capture_output=True, text=True, cwd=ROOT, check=False)


def test_plan_model_prints_only_what_was_asked():
    whole = cli("plan", "--stack", "prod").stdout
    one = cli("plan", "--stack", "prod", "--model", "llama-3-1-8b-instruct")
    assert one.returncode == 0, one.stderr
    models = [line.split()[0] for line in one.stdout.split("models:\n")[1].splitlines() if line.startswith("  ") and
              not line.startswith("    ")]
    assert models == ["llama-3-1-8b-instruct"]
    assert "gpu-g6e-xlarge-od" in one.stdout and "p4d" not in one.stdout and "triton-" not in one.stdout
    assert all(w.split(":")[1].strip() == "llama-3-1-8b-instruct" for w in one.stderr.splitlines() if w.startswith("warning"))
    assert len(one.stdout) < len(whole) / 3
    two = json.loads(cli("plan", "--stack", "prod", "--json", "--model", "fraud-scorer", "--model",
                         "llama-3-3-70b-instruct").stdout)
    assert sorted(m["name"] for m in two["models"]) == ["fraud-scorer", "llama-3-3-70b-instruct"]
    assert [s["name"] for s in two["triton_servers"]] == ["triton-c7i-xlarge"]
    assert {g["instance_type"] for g in two["node_groups"]} == {"c7i.xlarge", "p4d.24xlarge"}
    assert {a["model"] for a in two["alternatives"]} <= {"fraud-scorer", "llama-3-3-70b-instruct"}
    wrong = cli("plan", "--stack", "prod", "--model", "nope")
    assert wrong.returncode == 2 and "no model named 'nope'" in wrong.stderr


def test_plan_json_alternatives_carry_change_saving_and_figures():
    data = json.loads(cli("plan", "--stack", "prod", "--json").stdout)
    fp8 = [a for a in data["alternatives"] if a["model"] == "llama-3-1-8b-instruct" and a["kind"] == "precision"
           and a["change"].startswith("size.dtype: bf16 -> fp8 (")]
    assert fp8 and fp8[0]["monthly_saving_usd"] > 0
    assert fp8[0]["baseline_monthly_usd"] - fp8[0]["monthly_usd"] == pytest.approx(fp8[0]["monthly_saving_usd"])
    assert "g6e.xlarge" in fp8[0]["result"] and "p99 TPOT" in fp8[0]["result"]  # simulated, with its figures


@pytest.mark.parametrize("declared", ["fp32", "fp16"])
def test_a_dtype_contradicting_the_preset_is_warned_with_its_cost(declared):
    fleet, catalogue, envs = example()
    model = with_fields(fleet.model("llama-3-1-8b-instruct"), (("size.dtype", declared),))
    warnings = dtype_warnings(FleetSpec(models=(model,)), envs["prod"], catalogue)
    assert len(warnings) == 1 and f"size.dtype {declared} contradicts the bf16 weights" in warnings[0].message
    at_own = price_alone(model, envs["prod"], catalogue).monthly_usd
    at_bf16 = price_alone(with_fields(model, (("size.dtype", "bf16"),)), envs["prod"], catalogue).monthly_usd
    assert f"({at_own - at_bf16:+,.2f} for the declared dtype)" in warnings[0].message
    for fine in (llm(preset="llama-3.1-8b"), llm(preset="llama-3.1-8b", size={"dtype": "fp8"})):
        assert dtype_warnings(FleetSpec(models=(fine,)), envs["prod"], catalogue) == []


def test_an_ungated_preset_repository_needs_no_token():
    _, catalogue, _ = example()
    open_model = llm(preset="qwen2.5-7b")
    assert open_model.hub_gated()[0] is False
    assert llm(preset="qwen2.5-7b", artifact="acme/private-qwen").hub_gated()[0] is True, "not the preset's repo"
    assert llm(preset="llama-3.1-8b").hub_gated()[0] is True
    assert llm(preset="llama-3.1-8b", hub={"gated": False}).hub_gated()[0] is False
    relaxed = {"sla": {"p99_ttft_ms": 20000}}
    plan = compile_fleet(FleetSpec(models=(llm(preset="qwen2.5-7b", **relaxed), llm("gated", preset="llama-3.1-8b",
                                                                                      **relaxed))),
                         ENVIRONMENTS[0], catalogue)
    assert [m.hub_token_required for m in plan.models] == [True, False]  # gated, m
    fleet = compile_deploy_plan(Project(str(ROOT)).deployment("prod", stack_config("prod")))
    opened = fleet.model_copy(update={"vllm_models": tuple(m.model_copy(update={"hf_token_required": False})
                                                           for m in fleet.vllm_models)})
    assert credential_issues(fleet, False, False, "f")[0] and credential_issues(opened, False, False, "f") == ([], [])


class FakeHub:
    """The Hub's two answers from data: (repo, revision) -> (sha, gated), repo@sha -> config.json."""

    def __init__(self, revisions: dict, configs: dict):
        self.revisions, self.configs, self.urls = revisions, configs, []

    def __call__(self, url: str) -> bytes:
        self.urls.append(url)
        if "/api/models/" in url:
            repo, revision = url.split("/api/models/")[1].split("/revision/")
            if (repo, revision) not in self.revisions:
                raise NotFound(url)
            sha, gated = self.revisions[(repo, revision)]
            return json.dumps({"sha": sha, "gated": gated}).encode()
        repo, sha = url.split("huggingface.co/")[1].split("/resolve/")[0], url.split("/resolve/")[1].split("/")[0]
        if (repo, sha) not in self.configs:
            raise NotFound(url)
        return json.dumps(self.configs[(repo, sha)]).encode()


def test_validate_online_compares_the_hub_with_models_yaml(capsys):
    fleet = Project(str(ROOT)).fleet()
    targets = {t.model: t for t in hub_targets(fleet)}
    small = targets["llama-3-1-8b-instruct"]
    config = dict(LLM_PRESETS["llama-3.1-8b"].config)
    hub = FakeHub({(small.repo, small.revision): (small.revision, "manual")}, {(small.repo, small.revision): config})
    assert hub_differences(fleet.model(small.model), small, HubFacts(small.revision, True, config)) == []
    assert check_hub(fleet, hub) == 2, "the 405B's pinned revision is not on this fake Hub"
    out = capsys.readouterr()
    assert "llama-3-1-8b-instruct: meta-llama/Llama-3.1-8B-Instruct@0e9e39f249a1: agrees" in out.out
    assert "llama-3-1-405b-instruct" in out.err and "does not exist" in out.err
    wrong = {**config, "torch_dtype": "float32", "num_hidden_layers": 30}
    found = hub_differences(fleet.model(small.model), small, HubFacts(small.revision, False, wrong))
    assert any("publishes fp32 weights" in f for f in found) and any("layers is 30" in f for f in found)
    assert any("not gated" in f for f in found)


def test_validate_offline_says_what_it_would_check():
    result = cli("validate")
    assert result.returncode == 0 and "`validate --online` reads them" in result.stdout
    assert "meta-llama/Llama-3.1-405B-Instruct@069992c75aed" in result.stdout


def test_find_alternatives_is_deterministic():
    fleet, catalogue, envs = example()
    assert find_alternatives(fleet, envs["dev"], catalogue) == find_alternatives(fleet, envs["dev"], catalogue)


def test_validate_online_command_reads_the_injected_hub(capsys):
    from modelfleet.commands.validate import run
    fleet = Project(str(ROOT)).fleet()
    revisions, configs = {}, {}
    for target in hub_targets(fleet):
        preset = fleet.model(target.model).architecture
        revisions[(target.repo, target.revision)] = (target.revision, "manual")
        configs[(target.repo, target.revision)] = dict(LLM_PRESETS[preset].config)
    hub = FakeHub(revisions, configs)
    args = argparse.Namespace(project=str(ROOT), models=None, prices=None, online=True)
    assert run(args, fetch=hub) == 0
    out = capsys.readouterr().out
    assert out.count("agrees with models.yaml") == len(revisions) and out.endswith("every stack compiles: dev, prod, staging\n")
    assert all(url.startswith("https://huggingface.co/") for url in hub.urls) and len(hub.urls) == 2 * len(revisions)


def test_explore_refuses_a_model_its_stack_does_not_serve():
    fleet, catalogue, envs = example()
    from modelfleet.cost.explore import explore_model
    from modelfleet.errors import CompileError
    with pytest.raises(CompileError, match="not served in dev"):
        explore_model(fleet, envs["dev"], catalogue, "llama-3-1-405b-instruct")


def test_plan_counts_cpus_where_there_is_no_affinity_mask(monkeypatch):
    """macOS has no os.sched_getaffinity: plan's worker count falls back to the machine's CPU count."""
    from modelfleet import commands
    monkeypatch.delattr(commands.os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(commands.os, "cpu_count", lambda: 3)
    assert commands.cpus() == 3
    monkeypatch.setattr(commands.os, "cpu_count", lambda: None)
    assert commands.cpus() == 1


def test_alternatives_in_workers_are_those_of_one_process():
    """The forked workers' alternatives are the one-process alternatives, in the same order."""
    fleet, catalogue, envs = example()
    forked = find_alternatives(fleet, envs["prod"], catalogue, workers=2)
    assert forked and forked == find_alternatives(fleet, envs["prod"], catalogue)
