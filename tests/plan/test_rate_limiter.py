"""When the compiler rate-limits a shared GPU server, and what it does to the members' queue timeouts."""

from __future__ import annotations

from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.triton.rate_limiter import SERVER_FLAGS
from modelfleet.render.fleet import render_fleet
from modelfleet.render.triton import parse_config
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.load import parse_fleet_text

DEV = EnvironmentSpec.model_validate({"name": "dev", "region": "us-east-1", "capacity_type": "spot",
                                      "instance_families": ("g4dn",), "replicas": {"single_replica": True}})
MODEL = """
  - name: {name}
    type: other
    framework: onnx
    artifact: s3://bucket/{name}
    size: {{memory_gib: 0.1}}
    inputs: [{{name: x, dtype: fp32, dims: [1]}}]
    outputs: [{{name: y, dtype: fp32, dims: [1]}}]
    sla: {{p99_latency_ms: {p99}, peak_rps: 1}}
    profile: {{rps_per_instance: {rps}, compute_ms: {compute}, measured_on: t4}}
    overrides: {{max_batch_size: 1{extra}}}
"""


def compile_text(*models: dict):
    from modelfleet.plan.hardware.instances import load_instance_catalogue

    text = "models:" + "".join(MODEL.format(**{"extra": "", **m}) for m in models)
    return compile_fleet(parse_fleet_text(text), DEV, load_instance_catalogue())


SLOW = {"name": "slow", "p99": 5000, "rps": 2, "compute": 2000}
QUICK = {"name": "quick", "p99": 2500, "rps": 10, "compute": 100}


def test_members_with_room_for_each_others_batches_are_rate_limited():
    plan = compile_text(SLOW, QUICK)
    (server,) = plan.triton_servers
    assert server.args[-2:] == SERVER_FLAGS and server.rate_limiter.choice.startswith("rate limiter")
    slow, quick = plan.model("slow"), plan.model("quick")
    # p99 - its own batch - the neighbour's batch: 2,500 - 100 - 2,000 = 400 ms; 5,000 - 2,000 - 100 = 2,900 ms
    assert (quick.queue_timeout_us, slow.queue_timeout_us) == (400_000, 2_900_000)
    assert (quick.rate_limiter_priority, slow.rate_limiter_priority) == (1, 2)
    assert quick.decisions[0].choice == "rate limiter priority 1, queue timeout 400000 us"
    assert not any(d.choice.startswith("timeout ") for d in quick.decisions)  # the unlimited derivation is gone
    files = render_fleet(plan)
    config = parse_config(files[f"triton/{server.name}/quick/config.pbtxt"].decode())
    limiter = config.instance_group[0].rate_limiter
    assert [(r.name, r.count) for r in limiter.resources] == [("gpu", 1)] and limiter.priority == 1
    assert config.dynamic_batching.default_queue_policy.default_timeout_microseconds == 400_000


def test_a_member_too_tight_for_its_neighbours_keeps_the_server_unlimited():
    """quick's p99 of 1.5 s cannot wait behind slow's 2 s batch: both keep their own derivation."""
    plan = compile_text(SLOW, {**QUICK, "p99": 1500})
    (server,) = plan.triton_servers
    assert not set(SERVER_FLAGS) & set(server.args)
    assert server.rate_limiter.choice == "no rate limiter"
    assert "quick's p99 1500 ms leaves no time to queue after its own batch 100 ms and one batch of each " \
           "neighbour (2000 ms)" in server.rate_limiter.reason
    assert plan.model("quick").queue_timeout_us == 1_300_000 and plan.model("quick").rate_limiter_priority == 0


def test_a_timeout_the_compiler_cannot_rederive_keeps_the_server_unlimited():
    plan = compile_text(SLOW, {**QUICK, "extra": ", queue_timeout_us: 300000"})
    assert "quick's queue timeout is an override" in plan.triton_servers[0].rate_limiter.reason
    assert plan.model("quick").queue_timeout_us == 300_000


def test_one_model_on_its_gpu_has_nothing_to_contend_with():
    (server,) = compile_text(QUICK).triton_servers
    assert server.rate_limiter is None and not set(SERVER_FLAGS) & set(server.args)


def test_the_example_fleets_shared_server_says_why_it_runs_unlimited(plans):
    server = plans["prod"].server("triton-g5-xlarge")
    assert server.rate_limiter.choice == "no rate limiter"
    assert "session-recommender is stateful" in server.rate_limiter.reason
    assert all(s.rate_limiter is None for s in plans["prod"].triton_servers if s.device == "cpu")
