"""The tracing stack option: off by default, compiled into every Triton server's flags when set, left out of
a local ``serve`` (whose collector would be the cluster's)."""

from __future__ import annotations

from modelfleet.plan.compiler import compile_fleet
from modelfleet.serve import plan_local_repository
from modelfleet.spec.environment import TritonTracingSettings
from tests.conftest import STACKS


def test_tracing_is_off_by_default(plans):
    assert all(not a.startswith("--trace-config") for stack in STACKS for s in plans[stack].triton_servers for a in s.args)


def traced_plan(project, rate: float = 0.001):
    env = project.environment("prod")
    tracing = TritonTracingSettings(collector_url="http://otel-collector.observability:4318/v1/traces", sampling_rate=rate)
    env = env.model_copy(update={"triton": env.triton.model_copy(update={"tracing": tracing})})
    return compile_fleet(project.fleet(), env, project.catalogue())


def test_a_stack_with_tracing_traces_one_request_in_n_to_its_collector(project):
    for server in traced_plan(project).triton_servers:
        assert [a for a in server.args if a.startswith("--trace-config")] == [
            "--trace-config=mode=opentelemetry", "--trace-config=rate=1000", "--trace-config=level=TIMESTAMPS",
            "--trace-config=count=-1", "--trace-config=opentelemetry,url=http://otel-collector.observability:4318/v1/traces",
            f"--trace-config=opentelemetry,resource=service.name={server.name}",
            "--trace-config=opentelemetry,resource=deployment.environment=prod"]


def test_local_serve_leaves_the_clusters_tracing_out(project, tmp_path):
    local = plan_local_repository(traced_plan(project), tmp_path, frozenset({"python"}))
    assert not any(a.startswith("--trace-config") for a in local.server_args)
    assert any("tracing" in note for note in local.adaptations)
