"""Requests counted per caller (#28 item 6), end to end on real servers: the proxy configuration the renderer
writes (render/k8s/callers.py), run by a real HAProxy (Debian 12's, the release the image pins) in front of a
real tritonserver, scraped by a real Prometheus with the ServiceMonitor's own params and relabelings, and
queried with the dashboard's own expressions. Requests go over HTTP and gRPC with the header the generated
client sends."""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.engines.conftest import engine_import, engine_unavailable, require_tritonserver

require_tritonserver()
np = engine_import("triton", "numpy")
httpclient = engine_import("triton", "tritonclient.http")
grpcclient = engine_import("triton", "tritonclient.grpc")

from modelfleet.engines.process import die_with_parent, listens_on, signal_group  # noqa: E402
from modelfleet.engines.tritonserver import LocalTritonServer, free_ports  # noqa: E402
from modelfleet.render.client import CALLER_HEADER  # noqa: E402
from modelfleet.render.k8s.callers import COUNTERS, monitor_endpoint, proxy_config  # noqa: E402
from modelfleet.render.observability import slo_queries as q  # noqa: E402
from modelfleet.spec.engine_versions import HAPROXY_RELEASE  # noqa: E402
from tests.engines.test_tritonserver_smoke import DOUBLER, SERVER_ARGS, write_config  # noqa: E402
from tests.observability.prometheus_server import LocalPrometheus, ScrapeTarget  # noqa: E402

pytestmark = pytest.mark.engine

CALLERS = ("checkout-service", "fraud-batch")
NAMESPACE, JOB = "serving", "triton-doubler"
# (header value or None, protocol, requests): what each client sends, and what the proxy must count it as
SENT = [("checkout-service", "http", 3), ("checkout-service", "grpc", 2), ("fraud-batch", "http", 1),
        ("fraud-batch", "grpc", 4), ("Checkout-Service", "http", 1),  # a header's case is not its caller's
        ("intruder", "http", 2), (None, "grpc", 1)]  # undeclared, and none: both "other"
COUNTED = {("checkout-service", "http"): 4, ("checkout-service", "grpc"): 2, ("fraud-batch", "http"): 1,
           ("fraud-batch", "grpc"): 4, ("other", "http"): 2, ("other", "grpc"): 1}


def haproxy() -> str:
    found = shutil.which("haproxy")
    if found is None:
        engine_unavailable("triton", "haproxy is not installed (Debian's haproxy: scripts/setup.sh installs it)")
    return str(found)


def prometheus_relabelings(endpoint: dict) -> tuple[dict, ...]:
    """The ServiceMonitor's metricRelabelings as prometheus-operator writes them into Prometheus's config."""
    snake = {"sourceLabels": "source_labels", "targetLabel": "target_label"}
    return tuple({snake.get(k, k): v for k, v in rule.items()} for rule in endpoint["metricRelabelings"])


@pytest.fixture(scope="module")
def counted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalPrometheus, list[np.ndarray]]]:
    """The doubler behind the proxy, every request of SENT sent through it, and Prometheus scraping the proxy."""
    tmp = tmp_path_factory.mktemp("callers")
    model_dir = tmp / "repo" / "doubler"
    write_config(model_dir, '{ name: "X" data_type: TYPE_FP32 dims: [ 4 ] }', '{ name: "Y" data_type: TYPE_FP32 dims: [ 4 ] }')
    (model_dir / "1").mkdir()
    (model_dir / "1" / "model.py").write_text(DOUBLER)
    binary = haproxy()
    with LocalTritonServer(tmp / "repo", SERVER_ARGS, workdir=tmp / "work") as server:
        triton_http, triton_grpc, _ = server.ports
        http, grpc, metrics = free_ports(3)
        config = tmp / "haproxy.cfg"
        config.write_text(proxy_config(CALLERS, triton_http=triton_http, triton_grpc=triton_grpc, http=http,
                                       grpc=grpc, metrics=metrics, bind="127.0.0.1"))
        check = subprocess.run([binary, "-c", "-f", str(config)], capture_output=True, text=True, timeout=30)
        assert check.returncode == 0, check.stdout + check.stderr
        log = open(tmp / "haproxy.log", "wb")
        proxy = subprocess.Popen([binary, "-db", "-f", str(config)], stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True, preexec_fn=die_with_parent())
        try:
            deadline = time.monotonic() + 30
            while not all(listens_on(proxy.pid, p) for p in (http, grpc, metrics)):
                assert proxy.poll() is None, (tmp / "haproxy.log").read_text()
                assert time.monotonic() < deadline, "haproxy did not listen within 30 s"
                time.sleep(0.1)
            endpoint = monitor_endpoint()
            target = ScrapeTarget(JOB, f"127.0.0.1:{metrics}", {"namespace": NAMESPACE}, path=endpoint["path"],
                                  params=endpoint["params"], metric_relabel_configs=prometheus_relabelings(endpoint))
            with LocalPrometheus(tmp / "prometheus", [target], []) as prometheus:
                # every backend's counter scraped at 0 first, so the requests below are an increase (a rate)
                assert prometheus.wait_for(f'haproxy_backend_http_requests_total{{job="{JOB}"}}', 30)
                answers = [send(caller, protocol, http if protocol == "http" else grpc)
                           for caller, protocol, times in SENT for _ in range(times)]
                yield prometheus, answers
        finally:
            signal_group(proxy.pid, __import__("signal").SIGTERM)
            proxy.wait(30)
            log.close()


def send(caller: str | None, protocol: str, port: int) -> np.ndarray:
    """One inference of the doubler through the proxy, naming ``caller`` as the generated client does."""
    headers = {CALLER_HEADER: caller} if caller is not None else {}
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    module = httpclient if protocol == "http" else grpcclient
    client = module.InferenceServerClient(f"127.0.0.1:{port}")
    try:
        tensor = module.InferInput("X", [1, 4], "FP32")
        tensor.set_data_from_numpy(x)
        return client.infer("doubler", [tensor], headers=headers).as_numpy("Y")
    finally:
        client.close()


def test_requests_pass_through_the_proxy_unchanged(counted) -> None:
    _, answers = counted
    assert len(answers) == sum(times for _, _, times in SENT)
    for answer in answers:
        np.testing.assert_array_equal(answer, np.arange(4, dtype=np.float32).reshape(1, 4) * 2)


def test_each_request_is_counted_once_under_its_declared_caller(counted) -> None:
    """HTTP and gRPC alike; a header in another case counts as its caller, an undeclared or missing one as
    'other'; the series carry protocol and caller, and nothing else of HAProxy's is kept."""
    prometheus, _ = counted
    selector = f'{{namespace="{NAMESPACE}",job="{JOB}"}}'
    total = sum(times for _, _, times in SENT)
    found = prometheus.wait_for(f"sum(haproxy_backend_http_requests_total{selector}) >= {total}", 30)
    assert found, "Prometheus never scraped the proxy's counters after the requests"
    found = prometheus.query(f"haproxy_backend_http_requests_total{selector}")
    series = prometheus.query(f"sum by (caller, protocol) (haproxy_backend_http_requests_total{selector})")
    got = {(s["metric"]["caller"], s["metric"]["protocol"]): int(float(s["value"][1])) for s in series}
    assert {k: v for k, v in got.items() if v} == COUNTED
    names = {s["metric"]["__name__"] for s in prometheus.query(f'{{job="{JOB}",__name__=~"haproxy_.*"}}')}
    assert names == set(COUNTERS)  # the scrape keeps the two counters: bounded series per pod
    assert all("proxy" not in s["metric"] for s in found)


def test_the_dashboards_queries_show_each_caller(counted) -> None:
    """The Callers row's own expressions (slo_queries), on the scraped series: every caller that sent over a
    protocol has a rate there, and the 5xx panel's query is valid (no request failed, so it is empty or 0)."""
    prometheus, _ = counted
    target = q.Target(NAMESPACE, JOB)
    for protocol in ("http", "grpc"):
        expected = {caller for (caller, p) in COUNTED if p == protocol}
        deadline = time.monotonic() + 30
        while True:  # a rate needs two scrapes after the requests
            rates = {s["metric"]["caller"]: float(s["value"][1])
                     for s in prometheus.query(q.caller_request_rate(target, "1m", protocol))}
            if {c for c, r in rates.items() if r > 0} == expected or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert {c for c, r in rates.items() if r > 0} == expected, (protocol, rates)
    errors = prometheus.query(q.caller_server_error_rate(target, "1m"))
    assert all(float(s["value"][1]) == 0 for s in errors)


def test_the_local_haproxy_is_the_release_the_image_pins() -> None:
    """The configuration is proven on the HAProxy the stack deploys (engine_versions.HAPROXY_IMAGE)."""
    version = subprocess.run([haproxy(), "-v"], capture_output=True, text=True, timeout=30).stdout
    found = re.search(r"HAProxy version (\d+\.\d+\.\d+)", version)
    assert found is not None, version
    assert found.group(1) == HAPROXY_RELEASE
