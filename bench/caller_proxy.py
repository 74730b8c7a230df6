"""What the caller-counting proxy (render/k8s/callers.py) adds to a request: a real tritonserver serving a small
python model, asked ``--requests`` times in a row over HTTP and over gRPC, directly and through a real HAProxy
running the configuration the renderer writes (Debian's haproxy, the release the image pins). Prints p50 and
p99 of each, and what the proxy adds at the p50, per round (``--rounds``): figures from one run on a shared
machine, over loopback; compare within a round.

Usage: python bench/caller_proxy.py [--requests 2000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import numpy as np  # noqa: E402
import tritonclient.grpc as grpcclient  # noqa: E402
import tritonclient.http as httpclient  # noqa: E402

from modelfleet.engines.process import die_with_parent, listens_on  # noqa: E402
from modelfleet.engines.tritonserver import LocalTritonServer, free_ports  # noqa: E402
from modelfleet.render.client import CALLER_HEADER  # noqa: E402
from modelfleet.render.k8s.callers import proxy_config  # noqa: E402

CONFIG = """name: "doubler"
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU count: 1 } ]
dynamic_batching { }
"""
MODEL = '''import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse(
                    [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 2)])
                for r in requests]
'''
WARMUP = 50


def latencies(module, port: int, requests: int) -> list[float]:
    """Milliseconds of ``requests`` sequential inferences on one connection, after a warm-up."""
    client = module.InferenceServerClient(f"127.0.0.1:{port}")
    tensor = module.InferInput("X", [1, 4], "FP32")
    tensor.set_data_from_numpy(np.ones((1, 4), np.float32))
    headers = {CALLER_HEADER: "checkout-service"}
    try:
        for _ in range(WARMUP):
            client.infer("doubler", [tensor], headers=headers)
        found = []
        for _ in range(requests):
            started = time.perf_counter()
            client.infer("doubler", [tensor], headers=headers)
            found.append((time.perf_counter() - started) * 1000)
        return sorted(found)
    finally:
        client.close()


def quantile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(q * len(sorted_ms)))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    haproxy = shutil.which("haproxy")
    if haproxy is None:
        print("haproxy not found: scripts/setup.sh installs Debian's", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="modelfleet-proxy-") as tmp:
        model = Path(tmp) / "repo" / "doubler"
        (model / "1").mkdir(parents=True)
        (model / "config.pbtxt").write_text(CONFIG)
        (model / "1" / "model.py").write_text(MODEL)
        with LocalTritonServer(Path(tmp) / "repo", ["--exit-timeout-secs=5"], workdir=Path(tmp) / "work") as server:
            triton_http, triton_grpc, _ = server.ports
            http, grpc, metrics = free_ports(3)
            config = Path(tmp) / "haproxy.cfg"
            config.write_text(proxy_config(("checkout-service",), triton_http=triton_http, triton_grpc=triton_grpc,
                                           http=http, grpc=grpc, metrics=metrics, bind="127.0.0.1"))
            proxy = subprocess.Popen([haproxy, "-db", "-f", str(config)], preexec_fn=die_with_parent())
            try:
                deadline = time.monotonic() + 30
                while not all(listens_on(proxy.pid, p) for p in (http, grpc, metrics)):
                    if proxy.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("haproxy did not start")
                    time.sleep(0.1)
                print(f"{args.requests} sequential requests per cell, one connection each, loopback\n")
                print("| round | protocol | direct p50 ms | direct p99 ms | proxied p50 ms | proxied p99 ms | "
                      "added at p50 ms |")
                print("|---:|---|---:|---:|---:|---:|---:|")
                for round_ in range(1, args.rounds + 1):
                    for name, module, direct, proxied in (("HTTP", httpclient, triton_http, http),
                                                          ("gRPC", grpcclient, triton_grpc, grpc)):
                        plain, counted = latencies(module, direct, args.requests), latencies(module, proxied,
                                                                                             args.requests)
                        print(f"| {round_} | {name} | {quantile(plain, 0.5):.3f} | {quantile(plain, 0.99):.3f} | "
                              f"{quantile(counted, 0.5):.3f} | {quantile(counted, 0.99):.3f} | "
                              f"{quantile(counted, 0.5) - quantile(plain, 0.5):.3f} |", flush=True)
            finally:
                proxy.terminate()
                proxy.wait(30)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
