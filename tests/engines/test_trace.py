"""Reading tritonserver's trace file (the format 2.51 writes: one request's entries scattered by id)."""

from __future__ import annotations

import json

from modelfleet.engines.trace import parse_trace, read_trace, trace_args, trace_files

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


def test_the_trace_is_flushed_as_it_goes_so_it_survives_an_unclean_stop(tmp_path) -> None:
    """log-frequency 0 writes the trace only at a clean shutdown; a killed server would leave none."""
    args = trace_args(tmp_path / "trace.json")
    assert "--trace-config=triton,log-frequency=0" not in args
    assert any(a.startswith("--trace-config=triton,log-frequency=") for a in args)


def test_a_trace_is_read_from_every_numbered_file_in_order(tmp_path) -> None:
    for index, part in ((10, ENTRIES[4:]), (2, ENTRIES[:4])):
        (tmp_path / f"trace.json.{index}").write_text(json.dumps(part))
    (tmp_path / "trace.json.tmp").write_text("not a trace part")
    assert [f.name for f in trace_files(tmp_path / "trace.json")] == ["trace.json.2", "trace.json.10"]
    assert read_trace(tmp_path / "trace.json") == parse_trace(ENTRIES)
