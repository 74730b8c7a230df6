"""Adding a model never changes another model's artifacts, nor renames servers or node groups; order is
irrelevant (the plan, every artifact)."""

from __future__ import annotations

import copy

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from modelfleet.plan.compiler import compile_fleet
from modelfleet.render.fleet import render_fleet
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.load import parse_fleet_text
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


def _classic(name: str, memory_gib: float, peak_rps: float, availability: float) -> dict:
    return {"name": name, "type": "tabular", "framework": "onnx", "artifact": f"s3://models-bucket/{name}",
            "size": {"memory_gib": memory_gib}, "inputs": [{"name": "x", "dtype": "fp32", "dims": [16]}],
            "outputs": [{"name": "y", "dtype": "fp32", "dims": [1]}],
            "sla": {"p99_latency_ms": 100, "peak_rps": peak_rps, "availability": availability},
            "profile": {"rps_per_instance": 1000, "measured_on": "a10g", "compute_ms": 5}}


# The example's classic models plus memory-heavy ones (106 GiB), so that prod packs several shared servers.
SEVERAL_SERVERS = [m for m in EXAMPLE["models"] if m["type"] != "llm"] + [
    _classic(f"ranker-{i}", 10.0 + i, 40 * i + 20, 99.9 if i % 2 else 99.0) for i in range(8)]


def _plan(models: list[dict], catalogue):
    return compile_fleet(parse_fleet_text(yaml.safe_dump({"models": models})), PROD, catalogue)


def _ranks(plan, catalogue, extra: list[dict] = ()) -> dict[str, tuple]:
    """Every classic model's packing rank on the plan's GPU (packing.py: the first member of a server by it
    is the server's anchor)."""
    from modelfleet.plan.triton.packing.gpu import capacity_of, packing_rank
    from modelfleet.plan.triton.policy import size_classic

    fleet = parse_fleet_text(yaml.safe_dump({"models": SEVERAL_SERVERS + list(extra)}))
    instance = catalogue.instances[plan.triton_servers[0].instance_type]
    models = {m.name: m for m in fleet.models}
    sizings = {n: size_classic(m, instance.gpu, catalogue, PROD.triton.target_utilization) for n, m in models.items()}
    return {n: packing_rank(m, sizings, capacity_of(instance), PROD) for n, m in models.items()}


def _pool_name(plan) -> str:
    return "triton-" + plan.triton_servers[0].instance_type.replace(".", "-")


_NEW: dict[str, dict] = {}
names_around = st.one_of(st.from_regex(r"aaa-[a-z0-9]{1,8}", fullmatch=True),
                         st.from_regex(r"zzz-[a-z0-9]{1,8}", fullmatch=True),
                         st.from_regex(r"(fraud|ranker|text)-[a-z0-9]{1,6}", fullmatch=True))


@settings(max_examples=25, deadline=None)
@given(name=names_around, memory=st.floats(0.05, 6.0), rps=st.sampled_from([5, 50, 300]),
       availability=st.sampled_from([99.0, 99.9, 99.99]))
def test_server_names_survive_an_addition_anywhere_in_sort_order(name, memory, rps, availability, catalogue):
    """The documented rule (packing.py): a server whose members do not change keeps its name (the pool's first
    server gives its name up only to a new server that outranks it), and so does a server the new model joins,
    unless the new model outranks the anchor a further server is named after. Names sorting before or after
    every member ("aaa-", "zzz-") and between them make no difference."""
    assume(name not in {m["name"] for m in SEVERAL_SERVERS})
    new = _classic(name, round(memory, 3), rps, availability)
    _NEW[name] = new
    before = _plan(copy.deepcopy(SEVERAL_SERVERS), catalogue)
    after = _plan(copy.deepcopy(SEVERAL_SERVERS) + [new], catalogue)
    assert len(before.triton_servers) >= 3 and before.triton_servers[0].instance_type == after.triton_servers[0].instance_type
    rank = _ranks(after, catalogue, [new])
    first = _pool_name(before)
    now = {s.name: set(s.models) for s in after.triton_servers}
    for server in before.triton_servers:
        anchor = min(server.models, key=rank.__getitem__)
        home = next(n for n, members in now.items() if anchor in members)
        # the pool's first server is named after the pool: it moves only to a new server that outranks it
        displaced = server.name == first and home != first and rank[name] < rank[anchor]
        if now[home] == set(server.models) and not displaced:
            assert home == server.name, f"untouched server {server.name} renamed {home}"
        elif now[home] == set(server.models) | {name} and (server.name == first or rank[name] > rank[anchor]):
            assert home == server.name, f"{name} joined {server.name}, which became {home}"
    for server_name, members in now.items():  # named after the pool, or the pool and one of its own members
        assert server_name == first or server_name.removeprefix(f"{first}-") in members, server_name
    assert first in now


def test_an_aaa_model_joining_a_server_does_not_rename_it(catalogue):
    """The reported case: a small model whose name sorts first joins the server of the example's models."""
    before = _render(copy.deepcopy(EXAMPLE["models"]), catalogue)[0]
    tiny = _classic("aaa-fraud-scorer", 0.1, 20, 99.9)
    after = _render(copy.deepcopy(EXAMPLE["models"]) + [tiny], catalogue)[0]
    joined = next(s for s in after.triton_servers if "aaa-fraud-scorer" in s.models)
    assert {s.name for s in before.triton_servers} == {s.name for s in after.triton_servers}
    assert joined.name in {s.name for s in before.triton_servers} and joined.name == "triton-g5-xlarge"
