"""Callers declared in a stack file (``modelfleet:callers``, #28 item 6): validated where they are written, a proxy container in every
Triton pod whose CPU comes out of Triton's share (the fit is unchanged), its configuration in a ConfigMap,
the Services sending HTTP and gRPC through it, its counters scraped and relabelled, a Callers row on each
server's dashboard; a fleet without callers renders none of it. The proxy itself runs on a real HAProxy in
tests/engines/test_callers_proxy.py; the judges (kubernetes-validate, the real CRDs, checkov, the restricted
pod security standard) read these manifests in the tests marked judge below."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from modelfleet.errors import ModelfleetError
from modelfleet.plan.capacity.pod_resources import CALLER_PROXY
from modelfleet.plan.serving.engine_args import TRITON_GRPC_PORT, TRITON_HTTP_PORT
from modelfleet.project import Project
from modelfleet.render.k8s import callers as proxy
from modelfleet.render.observability.dashboards import triton_server_dashboard
from modelfleet.spec.environment import MAX_CALLERS
from tests.conftest import ROOT, STACKS
from tests.hardening.judges import crd_errors, is_crd, kubernetes_objects, require_module

CALLERS = ("checkout-service", "fraud-batch")


def with_callers(root: Path, declared: str, stacks: tuple[str, ...] = STACKS) -> Project:
    """A copy of the example project whose ``stacks`` declare ``declared`` (YAML) as modelfleet:callers."""
    for name in ("stacks", "samples"):
        shutil.copytree(ROOT / name, root / name, dirs_exist_ok=True)
    for name in ("Pulumi.yaml", "__main__.py", "modelfleet.lock.yaml", "models.yaml"):
        shutil.copy(ROOT / name, root / name)
    for stack in stacks:
        path = root / "stacks" / f"Pulumi.{stack}.yaml"
        path.write_text(path.read_text() + f"  modelfleet:callers: {declared}\n")
    return Project(root=str(root))


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Project:
    """The example project, every stack declaring CALLERS."""
    return with_callers(tmp_path_factory.mktemp("callers"), f"[{', '.join(CALLERS)}]")


@pytest.fixture(scope="module")
def rendered(counted: Project) -> dict[str, tuple]:
    out = {}
    for stack in STACKS:
        plan, files = counted.rendered(stack)
        out[stack] = (plan, kubernetes_objects(files))
    return out


# --------------------------------------------------------------------------------------------- the stack file
@pytest.mark.parametrize(("declared", "message"), [
    ("[checkout, other]", "config.modelfleet:callers[1]: 'other' counts the requests of undeclared callers"),
    ("[checkout, fraud, checkout]", "config.modelfleet:callers[2]: caller 'checkout' is declared twice"),
    # a header value is matched lowercased, so a declared name is lowercase; a space or a brace would reach
    # HAProxy's configuration, a quote Prometheus's label
    ("[Checkout]", "config.modelfleet:callers[0]: caller 'Checkout' is not a lowercase DNS label"),
    ("[checkout service]", "config.modelfleet:callers[0]: caller 'checkout service' is not a lowercase DNS label"),
    ('["a}b"]', "config.modelfleet:callers[0]: caller 'a}b' is not a lowercase DNS label"),
    ("checkout", "config.modelfleet:callers: expected a list"),
    ("[" + ", ".join(f"c{i}" for i in range(MAX_CALLERS + 1)) + "]", "config.modelfleet:callers: has more than 32"),
])
def test_bad_callers_are_located_errors(tmp_path: Path, declared: str, message: str) -> None:
    project = with_callers(tmp_path, declared, ("dev",))
    line = (tmp_path / "stacks" / "Pulumi.dev.yaml").read_text().count("\n")
    with pytest.raises(ModelfleetError) as raised:
        project.environment("dev")
    issues = [str(i) for i in raised.value.issues]
    assert any(f"Pulumi.dev.yaml:{line}:" in i and message in i for i in issues), issues


def test_declared_callers_reach_the_plan(rendered) -> None:
    for stack in STACKS:
        assert rendered[stack][0].callers == CALLERS


# --------------------------------------------------------------------------------------------- the pods
@pytest.mark.parametrize("stack", STACKS)
def test_the_proxy_is_set_aside_before_a_server_is_sized(counted, project, rendered, plans, stack) -> None:
    """A pod's RAM for Triton is the proxy's 96 MiB less (its response cache takes the rest), its CPU 250 m
    less, and the pod requests no more CPU than without callers: a node full of them still leaves the DaemonSet
    allowance. The node groups are the same."""
    from modelfleet.plan.triton.packing.gpu import server_ram_gib

    plan, plain = rendered[stack][0], plans[stack]
    env, bare = counted.environment(stack), project.environment(stack)
    catalogue = project.catalogue()
    assert [g.instance_type for g in plan.node_groups] == [g.instance_type for g in plain.node_groups]
    assert plan.triton_servers and len(plan.triton_servers) == len(plain.triton_servers)
    for server, before in zip(plan.triton_servers, plain.triton_servers):
        assert server.name == before.name and server.pod is not None and before.pod is not None
        assert server.pod.container("callers") == CALLER_PROXY
        if server.device == "gpu":
            instance = catalogue.instances[server.instance_type]
            room = server_ram_gib(instance, env)
            assert room == pytest.approx(server_ram_gib(instance, bare) - CALLER_PROXY.memory_mib / 1024)
            assert server.memory_request_gib <= room + 0.005
        triton, was = server.pod.container("triton"), before.pod.container("triton")
        assert triton.memory_mib <= was.memory_mib
        if was.cpu_millis > 100 + CALLER_PROXY.cpu_millis:
            assert triton.cpu_millis == was.cpu_millis - CALLER_PROXY.cpu_millis
            assert server.pod.request("cpu_millis") == before.pod.request("cpu_millis")


@pytest.mark.parametrize("stack", STACKS)
def test_every_triton_server_sends_its_traffic_through_the_proxy(rendered, stack) -> None:
    plan, objects = rendered[stack]
    for server in plan.triton_servers:
        name = server.kube_name
        mine = [o for o in objects if o["metadata"]["name"] in (name, f"{name}-callers")]
        by_kind = {(o["kind"], o["metadata"]["name"]): o for o in mine}
        workload = by_kind.get(("Deployment", name)) or by_kind[("Rollout", name)]
        spec = workload["spec"]["template"]["spec"]
        container = next(c for c in spec["containers"] if c["name"] == "callers")
        assert container["image"] == proxy.IMAGE
        assert container["resources"]["requests"] == {"cpu": "250m", "memory": "96Mi"}
        assert {"name": "callers", "configMap": {"name": f"{name}-callers"}} in spec["volumes"]
        config = by_kind[("ConfigMap", f"{name}-callers")]["data"][proxy.CONFIG_FILE]
        exit_timeout = next(int(a.split("=")[1]) for a in server.args if a.startswith("--exit-timeout-secs="))
        assert config == proxy.proxy_config(CALLERS, triton_http=TRITON_HTTP_PORT, triton_grpc=TRITON_GRPC_PORT,
                                            hard_stop_s=exit_timeout + 5)
        # a changed configuration rolls the pods (HAProxy reads it at start only)
        digest = workload["spec"]["template"]["metadata"]["annotations"][proxy.CONFIG_DIGEST]
        assert digest == hashlib.sha256(config.encode()).hexdigest()
        ports = {p["name"]: p["targetPort"] for p in by_kind[("Service", name)]["spec"]["ports"]}
        assert ports == {"http": "caller-http", "grpc": "caller-grpc", "metrics": "metrics",
                         "caller-metrics": "caller-metrics"}
        opened = {p["port"] for r in by_kind[("NetworkPolicy", name)]["spec"]["ingress"] for p in r.get("ports", [])}
        assert {proxy.CALLER_HTTP_PORT, proxy.CALLER_GRPC_PORT, proxy.CALLER_METRICS_PORT} <= opened
        monitor = by_kind[("ServiceMonitor", name)]
        assert monitor["spec"]["endpoints"][1] == proxy.monitor_endpoint()
        assert crd_errors(monitor) == []  # the real prometheus-operator CRD, strict


def test_a_fleet_without_callers_renders_no_proxy(project) -> None:
    objects = kubernetes_objects(project.rendered("dev")[1])
    assert not [o for o in objects if o["metadata"]["name"].endswith("-callers")]
    pods = [o["spec"]["template"]["spec"] for o in objects if o["kind"] == "Deployment"]
    assert pods and not [c for p in pods for c in p["containers"] if c["name"] == "callers"]


def test_each_server_dashboard_has_a_callers_row(rendered) -> None:
    plan = rendered["prod"][0]
    for server in plan.triton_servers:
        rows = {r.title: r for r in triton_server_dashboard(plan, server).rows}
        queries = [query.expr for panel in rows["Callers"].panels for query in panel.queries]
        assert len(queries) == 3 and all("by (caller)" in e and f'job="{server.kube_name}"' in e for e in queries)


# --------------------------------------------------------------------------------------------- the judges
@pytest.mark.judge
@pytest.mark.parametrize("stack", STACKS)
def test_kubernetes_validate_and_the_crds_accept_them(rendered, stack) -> None:
    kubernetes_validate = require_module("kubernetes_validate")
    for obj in rendered[stack][1]:
        if is_crd(obj):
            assert crd_errors(obj) == [], (obj["kind"], obj["metadata"]["name"])
        else:
            kubernetes_validate.validate(obj, "1.33", strict=True)


@pytest.mark.judge
def test_checkov_and_the_restricted_standard_accept_the_proxy(counted, tmp_path: Path) -> None:
    from tests.hardening.pod_security import check_restricted
    from tests.hardening.test_judges import checkov_findings, checkov_report, judged_objects

    objects = judged_objects(counted, "prod")
    assert checkov_findings(checkov_report(objects, tmp_path), objects) == []
    assert [str(v) for o in objects for v in check_restricted(o)] == []


def test_the_proxy_configuration_holds_only_declared_names() -> None:
    """Every word HAProxy reads from a caller name is the name itself: the backends, the ACLs."""
    text = proxy.proxy_config(CALLERS, triton_http=1, triton_grpc=2)
    for caller in (*CALLERS, "other"):
        assert f"backend http.{caller}\n" in text and f"backend grpc.{caller}\n" in text


def _client_module(plans) -> object:
    """The generated client module (modelfleet client), imported from its text."""
    import sys
    import types

    from modelfleet.render.client import render_client

    name = f"fleet_client_{len(sys.modules)}"
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    try:
        exec(compile(render_client(plans), f"{name}.py", "exec"), module.__dict__)  # noqa: S102 - our own output
    finally:
        del sys.modules[name]
    return module


def test_the_generated_client_refuses_an_undeclared_caller(rendered, plans) -> None:
    """With callers declared, a caller the servers would count as 'other' is a typo caught at the first request;
    without them, any service name goes."""
    client = _client_module([rendered[stack][0] for stack in STACKS])
    assert client.CALLERS == CALLERS
    assert client._with_caller("fraud-batch", {})["headers"] == {"x-modelfleet-caller": "fraud-batch"}
    with pytest.raises(ValueError, match="not one of the callers the stacks count"):
        client._with_caller("checkout", {})
    plain = _client_module([plans[stack] for stack in STACKS])
    assert plain.CALLERS == () and plain._with_caller("checkout", {})["headers"] == {"x-modelfleet-caller": "checkout"}


def test_one_client_accepts_the_callers_every_counting_stack_declares(tmp_path: Path) -> None:
    """The module is valid for every stack: a stack that counts callers refuses none, but counts an undeclared
    one as 'other', so the client accepts those declared wherever callers are counted; none in common fails."""
    from modelfleet.render.client import render_client

    project = with_callers(tmp_path / "a", "[checkout-service, fraud-batch, load-test]", ("dev",))
    (tmp_path / "a" / "stacks" / "Pulumi.prod.yaml").write_text(
        (tmp_path / "a" / "stacks" / "Pulumi.prod.yaml").read_text() + "  modelfleet:callers: [fraud-batch, checkout-service]\n")
    client = _client_module([project.plan(stack) for stack in STACKS])  # staging declares none: any name suits it
    assert client.CALLERS == ("checkout-service", "fraud-batch")
    apart = with_callers(tmp_path / "b", "[load-test]", ("dev",))
    (tmp_path / "b" / "stacks" / "Pulumi.prod.yaml").write_text(
        (tmp_path / "b" / "stacks" / "Pulumi.prod.yaml").read_text() + "  modelfleet:callers: [checkout-service]\n")
    with pytest.raises(ModelfleetError, match="no caller is declared in every stack that counts callers"):
        render_client([apart.plan(stack) for stack in STACKS])


def test_a_cpu_server_that_fills_its_node_still_fits_beside_the_proxy() -> None:
    """tests/plan/test_cpu_models.py's HEAVY model fills a c7i.xlarge pod's host RAM to within 0.22 GiB: with
    callers counted, the proxy's 96 MiB and 250 m are set aside before its replicas and cache are chosen, so the
    whole pod (Triton and proxy) still fits what the node offers beside the DaemonSet allowance."""
    from modelfleet.plan.capacity.fit import free_per_node, pod_resources
    from modelfleet.plan.compiler import compile_fleet
    from modelfleet.plan.hardware.instances import load_instance_catalogue
    from modelfleet.plan.triton.cpu_placement import pod_ram_gib, usable_cores
    from modelfleet.spec.load import parse_fleet_text
    from tests.plan.test_cpu_models import HEAVY, PROD

    catalogue = load_instance_catalogue()
    counting = PROD.model_copy(update={"callers": CALLERS})
    xlarge = catalogue.cpu_instances["c7i.xlarge"]
    assert pod_ram_gib(xlarge, counting) == pytest.approx(pod_ram_gib(xlarge, PROD) - 96 / 1024)
    assert usable_cores(xlarge, counting) <= usable_cores(xlarge, PROD)
    plan = compile_fleet(parse_fleet_text(HEAVY), counting, catalogue)
    cpu_servers = [s for s in plan.triton_servers if s.device == "cpu"]
    assert cpu_servers
    for server in cpu_servers:
        assert server.pod.container("callers") == CALLER_PROXY
        assert server.memory_request_gib <= pod_ram_gib(catalogue.cpu_instances[server.instance_type], counting) + 1e-9
        group = plan.node_group(server.node_group)
        needs, free = pod_resources(server.pod, 0), free_per_node(group)
        assert needs.memory_gib <= free.memory_gib and needs.cpu <= free.cpu, (server.name, needs, free)


def test_a_mirror_of_the_proxy_image_is_a_stack_setting(tmp_path: Path) -> None:
    """deploy.callerProxyImage (a private registry's mirror, say) is the image every proxy runs; a value that
    is not an image reference is a located error."""
    project = with_callers(tmp_path / "ok", f"[{', '.join(CALLERS)}]", ("dev",))
    stack = tmp_path / "ok" / "stacks" / "Pulumi.dev.yaml"
    mirror = "123456789012.dkr.ecr.us-east-1.amazonaws.com/mirror/haproxy:2.6.12"
    text = stack.read_text()
    assert "  modelfleet:deploy:\n" in text  # dev's stack file has deploy settings: the key joins them
    stack.write_text(text.replace("  modelfleet:deploy:\n", f"  modelfleet:deploy:\n    callerProxyImage: {mirror}\n", 1))
    objects = kubernetes_objects(project.rendered("dev")[1])
    images = {c["image"] for o in objects if o["kind"] == "Deployment"
              for c in o["spec"]["template"]["spec"]["containers"] if c["name"] == "callers"}
    assert images == {mirror}
    stack.write_text(stack.read_text().replace(mirror, "'haproxy:2.6; rm -rf /'"))
    with pytest.raises(ModelfleetError, match="callerProxyImage"):
        project.environment("dev")
