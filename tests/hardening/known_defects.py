"""Crashes the fuzzers found that are not fixed yet, each with its owner and the smallest input that shows it.

While a defect is listed, the property tests count an input that crashes with its signature (exception type
and a function on the failing stack: where it escapes from, or where the time limit caught it) as
``known:<id>`` instead of failing, so they still fail on anything new.
``test_fuzz.py`` runs every reproduction as a strict xfail: once a fix lands it passes, the xfail fails,
and the entry must be deleted here (which re-arms the property tests against a regression).
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

CLASSIC = """models:
  - name: scorer
    type: tabular
    framework: onnx
    artifact: s3://bkt/scorer
    version: 1
    size: {{memory_gib: 0.5}}
    inputs: [{{name: x, dtype: fp32, dims: [{dims}]}}]
    outputs: [{{name: y, dtype: fp32, dims: [1]}}]
    sla: {{p99_latency_ms: {p99}, peak_rps: {rps}, availability: 99.0}}
    profile: {{{profile}measured_on: a10g}}
    overrides: {{{overrides}}}
"""
LLM = """models:
  - name: chat
    type: llm
    artifact: org/model
    revision: 0123456789abcdef0123456789abcdef01234567
    size: {{dtype: bf16}}
    architecture: llama-3.1-8b
    sla: {{max_context_tokens: 4096, {load}, p99_ttft_ms: 2000, availability: 99.0}}
    profile: {{output_tokens_per_s_per_sequence: {rate}}}
"""


def classic_pair(rps: str, rps_per_instance: str, gpu_memory_gib: str) -> str:
    """Two small classic models that the packer puts on one GPU."""
    model = """  - name: {name}
    type: tabular
    framework: onnx
    artifact: s3://bkt/{name}
    version: 1
    size: {{params: 1, dtype: bf16}}
    inputs: [{{name: x, dtype: fp32, dims: [4]}}]
    outputs: [{{name: y, dtype: fp32, dims: [1]}}]
    sla: {{p99_latency_ms: 100, peak_rps: {rps}, availability: 99.0}}
    profile: {{rps_per_instance: {rpi}, gpu_memory_gib: {memory}, compute_ms: 5}}
"""
    return "models:\n" + "".join(model.format(name=n, rps=rps, rpi=rps_per_instance, memory=gpu_memory_gib) for n in "ab")


def classic(dims: str = "64", p99: str = "50", rps: str = "100", profile: str = "rps_per_instance: 1000, compute_ms: 5, ",
            overrides: str = "") -> str:
    return CLASSIC.format(dims=dims, p99=p99, rps=rps, profile=profile, overrides=overrides)


def llm(load: str = "peak_concurrent_sequences: 8", rate: str = "30") -> str:
    return LLM.format(load=load, rate=rate)


@dataclass(frozen=True)
class KnownDefect:
    id: str
    owner: str
    reason: str
    signatures: tuple[tuple[str, str], ...]  # (exception type, innermost function)
    reproductions: tuple[str, ...]

    def matches(self, error: BaseException) -> bool:
        frames = {frame.name for frame in traceback.extract_tb(error.__traceback__)}
        return any(kind == type(error).__name__ and function in frames for kind, function in self.signatures)


# zero-rps-unit-cost, zero-gpu-share (cost.py divided by a throughput or by gpu_shares the plan rounds to 0) and
# infinite-ttft-candidate are fixed; their reproductions are normal tests now (test_fuzz.py, and tests/cost/test_degenerate_plans.py).
INFINITE_TTFT = """models:
- name: xfghg7gif
  type: llm
  artifact: org/model
  size: {dtype: fp16}
  architecture: deepseek-r1
  sla: {max_context_tokens: 1571, peak_output_tokens_per_s: 63091756.21293382, p99_ttft_ms: 4325.094306962532,
        availability: 99.0, avg_context_tokens: 38}
  profile: {output_tokens_per_s_per_sequence: 10000.0}
  revision: c6f2b1d200000000000000000000000000000000
"""
KNOWN_DEFECTS: tuple[KnownDefect, ...] = ()  # none open; infinite-ttft-candidate (OverflowError in best_of) is
# fixed by #22: a layout no replica count serves is refused (its simulated queue outgrows the run), and its
# reproduction INFINITE_TTFT is a normal test in test_fuzz.py


def known_defect(error: BaseException) -> KnownDefect | None:
    return next((d for d in KNOWN_DEFECTS if d.matches(error)), None)
