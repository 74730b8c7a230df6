"""Adding a model never changes another model's artifacts, nor renames servers or node groups; order is
irrelevant (the plan, every artifact)."""

from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.catalogue import parse_fleet_text
from modelfleet.compiler import compile_fleet
from modelfleet.environment import EnvironmentSpec
from modelfleet.render import render_fleet
from tests.hardening.fuzz_inputs import EXAMPLE

PROD = EnvironmentSpec(name="prod", region="us-east-1")


def _render(models: list[dict], catalogue) -> tuple:
    plan = compile_fleet(parse_fleet_text(yaml.safe_dump({"models": models})), PROD, catalogue)
    return plan, render_fleet(plan)


def _llm(name: str, conc: int) -> dict:
    return {"name": name, "type": "llm", "artifact": "Qwen/Qwen2.5-7B-Instruct", "size": {"dtype": "bf16"},
            "architecture": "qwen2.5-7b", "sla": {"max_context_tokens": 4096, "peak_concurrent_sequences": conc,
                                                  "p99_ttft_ms": 3000}}


@settings(max_examples=25, deadline=None)
@given(order=st.permutations(range(len(EXAMPLE["models"]))))
def test_any_order_gives_identical_artifacts(order, catalogue):
    models = [copy.deepcopy(EXAMPLE["models"][i]) for i in order]
    assert _render(models, catalogue)[1] == _render(copy.deepcopy(EXAMPLE["models"]), catalogue)[1]


@settings(max_examples=20, deadline=None)
@given(conc=st.integers(1, 200), name=st.from_regex(r"[a-z][a-z0-9]{2,10}", fullmatch=True))
def test_adding_an_llm_changes_no_other_models_artifacts(conc, name, catalogue):
    base = copy.deepcopy(EXAMPLE["models"])
    plan_before, before = _render(base, catalogue)
    name = f"new-{name}"
    plan_after, after = _render(base + [_llm(name, conc)], catalogue)
    for path, content in before.items():
        if path.startswith(("triton/", "vllm/")):
            assert after.get(path) == content, path
    assert {g.name for g in plan_before.node_groups} <= {g.name for g in plan_after.node_groups}
    assert {s.name for s in plan_before.triton_servers} == {s.name for s in plan_after.triton_servers}


def test_adding_a_small_classic_model_keeps_every_other_models_config(catalogue):
    """Per-model Triton settings depend only on the model and the GPU type, never on its neighbours."""
    base = copy.deepcopy(EXAMPLE["models"])
    extra = dict(copy.deepcopy(base[2]), name="fraud-scorer-v2")
    before = _render(base, catalogue)[0]
    after = _render(base + [extra], catalogue)[0]
    for model in before.models:
        if model.serving == "triton" and hasattr(model, "queue_timeout_us"):
            again = after.model(model.name)
            if again.instance_type == model.instance_type:
                assert (again.max_batch_size, again.queue_timeout_us, again.max_queue_size, again.response_cache) == (
                    model.max_batch_size, model.queue_timeout_us, model.max_queue_size, model.response_cache)
