"""A real Prometheus (Debian's 2.42) on loopback for the end-to-end tests: it scrapes local engines every
second and evaluates the generated rules every second; its HTTP API answers queries and lists alerts."""

from __future__ import annotations

import json
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from modelfleet.engines.process import die_with_parent, signal_group
from modelfleet.engines.tritonserver import free_ports
from tests.observability.promtool import require

_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))


@dataclass(frozen=True)
class ScrapeTarget:
    job: str  # the job label, as a ServiceMonitor sets it: the workload's Service name
    address: str  # host:port
    labels: dict[str, str]  # what the operator's relabelling adds in a cluster (namespace, pod)
    path: str = "/metrics"
    params: dict[str, list[str]] | None = None  # a ServiceMonitor endpoint's params
    metric_relabel_configs: tuple[dict[str, Any], ...] = ()  # its metricRelabelings, as Prometheus spells them


class LocalPrometheus:
    def __init__(self, workdir: Path, targets: list[ScrapeTarget], groups: list[dict[str, Any]],
                 interval: str = "1s") -> None:
        self.workdir, self.targets, self.groups, self.interval = workdir, targets, groups, interval
        self.port = free_ports(1)[0]
        self.process: subprocess.Popen[bytes] | None = None
        self.log = workdir / "prometheus.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def config(self) -> dict[str, Any]:
        return {"global": {"scrape_interval": self.interval, "evaluation_interval": self.interval,
                           "scrape_timeout": self.interval},
                "rule_files": ["rules.yaml"],
                "scrape_configs": [{"job_name": t.job, "metrics_path": t.path,
                                    "static_configs": [{"targets": [t.address], "labels": t.labels}],
                                    **({"params": t.params} if t.params else {}),
                                    **({"metric_relabel_configs": list(t.metric_relabel_configs)}
                                       if t.metric_relabel_configs else {})}
                                   for t in self.targets]}

    def start(self, timeout_s: float = 60) -> LocalPrometheus:
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "rules.yaml").write_text(yaml.safe_dump({"groups": self.groups}))
        (self.workdir / "prometheus.yml").write_text(yaml.safe_dump(self.config()))
        command = [require("prometheus"), f"--config.file={self.workdir / 'prometheus.yml'}",
                   f"--storage.tsdb.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir,
                                            start_new_session=True, preexec_fn=die_with_parent())
        deadline = time.monotonic() + timeout_s
        while not self._ready():
            assert self.process.poll() is None, f"prometheus exited: {self.log.read_text()[-2000:]}"
            assert time.monotonic() < deadline, f"prometheus not ready in {timeout_s} s: {self.log.read_text()[-2000:]}"
            time.sleep(0.2)
        return self

    def _ready(self) -> bool:
        try:
            with _LOOPBACK.open(self.url + "/-/ready", timeout=2) as response:
                return response.status == 200
        except OSError:
            return False

    def api(self, path: str, **params: str) -> Any:
        url = f"{self.url}/api/v1/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        with _LOOPBACK.open(url, timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return self.api("query", query=expr)["result"]

    def alerts(self) -> list[dict[str, Any]]:
        return self.api("alerts")["alerts"]

    def wait_for(self, expr: str, timeout_s: float) -> list[dict[str, Any]]:
        """Poll until ``expr`` returns something (e.g. ``up == 1`` after the first scrapes)."""
        deadline = time.monotonic() + timeout_s
        while True:
            result = self.query(expr)
            if result or time.monotonic() > deadline:
                return result
            time.sleep(0.25)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                signal_group(self.process.pid, signal.SIGKILL)
                self.process.wait(10)

    def __enter__(self) -> LocalPrometheus:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
