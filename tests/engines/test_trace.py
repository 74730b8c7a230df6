"""Reading tritonserver's trace file (the format 2.51 writes: one request's entries scattered by id)."""

from __future__ import annotations

from modelfleet.engines.trace import parse_trace, trace_args

ENTRIES = [
    {"id": 2, "timestamps": [{"name": "QUEUE_START", "ns": 5_000}]},
    {"id": 1, "timestamps": [{"name": "HTTP_RECV_START", "ns": 100}]},
    {"id": 1, "timestamps": [{"name": "HTTP_SEND_END", "ns": 32_100}]},
    {"id": 1, "model_name": "m", "model_version": 1},
    {"id": 1, "timestamps": [{"name": "QUEUE_START", "ns": 1_000}]},
    {"id": 2, "model_name": "m", "model_version": 1},
    {"id": 1, "timestamps": [{"name": "COMPUTE_END", "ns": 31_000}]},
    {"id": 1, "timestamps": [{"name": "COMPUTE_START", "ns": 4_000}]},
]


def test_entries_are_gathered_per_request() -> None:
    executed, rejected = parse_trace(ENTRIES)
    assert (executed.model, executed.queue_us, executed.compute_us, executed.server_us) == ("m", 3.0, 27.0, 32.0)
    assert (rejected.model, rejected.queue_us, rejected.compute_us) == ("m", None, None)  # never executed
    assert rejected.server_us is None


def test_every_request_is_traced_with_timestamps(tmp_path) -> None:
    args = trace_args(tmp_path / "trace.json")
    assert f"--trace-config=triton,file={tmp_path / 'trace.json'}" in args
    assert {"--trace-config=rate=1", "--trace-config=count=-1", "--trace-config=level=TIMESTAMPS"} <= set(args)
