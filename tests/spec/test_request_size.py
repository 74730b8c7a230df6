"""One request's inputs are bounded by what Triton accepts (issue 17, defect 8): before, dims of
2^31 x 2^31 x 2^31 fp32 were planned. The bound is Triton's HTTP default (64 MiB), the error is located
at the model's inputs and says the limit and the fix."""

from __future__ import annotations

import textwrap

import pytest

from modelfleet.errors import SpecError
from modelfleet.spec.load import parse_fleet_text
from modelfleet.spec.request_size import MAX_REQUEST_INPUT_BYTES, format_bytes

MODEL = textwrap.dedent("""\
    models:
      - name: scanner
        type: vision
        framework: onnx
        artifact: s3://models-bucket/scanner
        size: {{params: 25M, dtype: fp32}}
        inputs:
          - {{name: small, dtype: fp32, dims: [4]}}
          - {{name: x, dtype: {dtype}, dims: {dims}}}
        outputs:
          - {{name: y, dtype: fp32, dims: [1000]}}
        sla: {{p99_latency_ms: 100, peak_rps: 200}}
""")


def parse(dtype: str, dims: str):
    return parse_fleet_text(MODEL.format(dtype=dtype, dims=dims), "models.yaml")


def test_the_issues_dims_are_a_located_error_with_the_limit_and_the_fix():
    with pytest.raises(SpecError) as caught:
        parse("fp32", "[2147483647, 2147483647, 2147483647]")
    (issue,) = caught.value.issues
    assert (issue.line, issue.path) == (7, "models[0].inputs")
    assert "3.96e+28 bytes" in issue.message and "64 MiB Triton accepts in one HTTP request" in issue.message
    assert "--http-max-input-size" in issue.message
    assert "they exclude the batch dimension" in issue.fix and "by reference" in issue.fix


def test_the_bound_is_exact_and_counts_every_input():
    spare = MAX_REQUEST_INPUT_BYTES - 16  # the other input takes 4 x fp32
    parse("uint8", f"[{spare}]")
    with pytest.raises(SpecError, match="at least 64 MiB"):
        parse("uint8", f"[{spare + 1}]")


def test_variable_dimensions_and_strings_count_at_their_smallest():
    parse("fp32", "[-1, -1, -1]")  # 4 bytes at least: a variable dimension may be 1
    parse("string", f"[{(MAX_REQUEST_INPUT_BYTES - 16) // 4}]")  # each string its 4-byte length at least
    with pytest.raises(SpecError, match="192 MiB"):
        parse("fp32", "[3, -1, 4096, 4096]")


def test_sizes_read_as_a_person_reads_them():
    assert [format_bytes(n) for n in (602_112, 64 * 1024**2, 3 * 2**40, 2**95)] == [
        "602,112 bytes", "64 MiB", "3 TiB", "3.96e+28 bytes"]
