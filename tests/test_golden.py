"""Golden files: the rendered example, byte for byte, per stack.

Rewrite them only on purpose: MODELFLEET_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from modelfleet.render.fleet import render_fleet
from modelfleet.render.triton import parse_config
from tests.conftest import STACKS, update_golden

GOLDEN = Path(__file__).parent / "golden"


def _tree(directory: Path) -> dict[str, bytes]:
    return {p.relative_to(directory).as_posix(): p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("stack", STACKS)
def test_render_matches_golden(project, stack):
    files = project.rendered(stack)[1]
    target = GOLDEN / stack
    if update_golden():
        shutil.rmtree(target, ignore_errors=True)
        for relative, content in files.items():
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            (target / relative).write_bytes(content)
    golden = _tree(target)
    assert sorted(files) == sorted(golden), "set of rendered files changed (MODELFLEET_UPDATE_GOLDEN=1 to accept)"
    for relative, content in files.items():
        assert content == golden[relative], f"{stack}/{relative} differs from golden"


@pytest.mark.parametrize("stack", STACKS)
def test_every_config_parses_through_tritons_schema(plans, stack):
    from tritonclient.grpc import model_config_pb2 as mc

    configs = {k: v for k, v in render_fleet(plans[stack]).items() if k.endswith("config.pbtxt")}
    assert configs
    for relative, content in configs.items():
        config = parse_config(content.decode())
        assert config.name == relative.split("/")[-2], "name must equal the model's directory"
        if config.backend == "vllm":
            continue
        if config.platform == "ensemble":  # every step is a model of the same server's repository
            server = relative.rsplit("/", 2)[0]
            assert all(f"{server}/{step.model_name}/config.pbtxt" in configs for step in config.ensemble_scheduling.step)
            continue
        planned = plans[stack].model(config.name)
        if planned.device == "cpu":  # KIND_CPU, each instance's threads its share of the server's cores
            assert config.instance_group[0].kind == mc.ModelInstanceGroup.KIND_CPU
            assert config.parameters["intra_op_thread_count"].string_value == str(
                planned.cpu_cores // planned.instance_count)
        else:
            assert config.instance_group[0].kind == mc.ModelInstanceGroup.KIND_GPU
        if config.HasField("sequence_batching"):  # no queue policy exists there: idle release and the controls
            assert config.sequence_batching.max_sequence_idle_microseconds > 0
            assert [c.name for c in config.sequence_batching.control_input] == ["START", "END", "READY", "CORRID"]
            continue
        assert config.HasField("dynamic_batching")
        assert config.dynamic_batching.max_queue_delay_microseconds > 0
        policies = [config.dynamic_batching.default_queue_policy, *config.dynamic_batching.priority_queue_policy.values()]
        for policy in policies:
            assert policy.timeout_action == mc.ModelQueuePolicy.REJECT
            assert policy.default_timeout_microseconds > 0
            assert 0 < policy.max_queue_size


def test_prod_queue_policy_is_derived_from_the_sla(plans):
    # fraud-scorer runs on KIND_CPU instances in prod (plan/devices.py: cheaper than a third g5.xlarge), with the
    # figures measured on a c7i: 5,000 req/s and 5 ms per instance. batch: tabular default 256 takes
    # 256 / 5,000 = 51.2 ms > 0.4 x p99 20 ms = 8 ms, halved to 128 (25.6), 64 (12.8), 32 -> 6.4 ms.
    # compute = max(5 ms, 6.4 ms) = 6.4 ms; timeout = 20 - 2 x 6.4 (the batch in progress and its own) = 7.2 ms;
    # window = min(20 ms / 10, 5 ms, 7.2 ms / 2) = 2 ms, inside the timeout.
    # queue: 256 MiB / (64 fp32 = 256 B) = 1,048,576 requests, capped at 65,536.
    # instances: c7i.xlarge offers 3.92 vCPUs, less the 0.5 DaemonSet allowance and Triton's 0.5: 2 whole vCPUs,
    # 2 instances of 1 vCPU (its 12,000 req/s keep 12,000 / (5,000 x 0.7) = 3.43 busy over 2 replicas).
    model = plans["prod"].model("fraud-scorer")
    config = parse_config(render_fleet(plans["prod"])[f"triton/{model.server}/fraud-scorer/config.pbtxt"].decode())
    assert (model.device, model.instance_type, model.replicas) == ("cpu", "c7i.xlarge", 2)
    assert config.max_batch_size == 32
    assert config.dynamic_batching.max_queue_delay_microseconds == 2_000
    assert config.dynamic_batching.default_queue_policy.default_timeout_microseconds == 7_200
    assert config.dynamic_batching.default_queue_policy.max_queue_size == 65_536
    assert [(g.kind, g.count) for g in config.instance_group] == [(2, 2)]  # KIND_CPU x 2
    assert config.parameters["intra_op_thread_count"].string_value == "1"
    assert config.response_cache.enable
    assert config.platform == "onnxruntime_onnx"
