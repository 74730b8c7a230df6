"""The ``profile:`` blocks ``modelfleet profile`` writes, and writing one into models.yaml. Pure: text in, text out.

Why ruamel.yaml here and nowhere else: models.yaml is reviewed in pull requests, so a measurement must change
its ``profile:`` lines and nothing else, comments, key order and flow style kept. ruamel's round-trip mode
does that (models.yaml round-trips byte for byte, tests/test_profile_yaml.py). The compiler reads YAML with
PyYAML's C composer instead (spec/yaml_source.py: six times faster on large catalogues, with positions), so
ruamel is an optional extra (``modelfleet[profile]``) that only this command imports.

A classic block sets ``measured_on``, ``measured_at``, ``compute_ms`` and ``rps_per_instance`` (the largest
batch measured: what older tools read) and ``batches`` (what the compiler picks its batch from); the rest of
an existing profile (``gpu_memory_gib``, ``efficient_batch_size``, ``cpu``) is kept. An LLM block sets the
measured fields of spec/profiles.py and keeps ``output_tokens_per_s_per_sequence``.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

from ..engines.triton_profile import BatchMeasurement
from ..engines.vllm_bench import LlmLoad, LlmMeasurement
from ..errors import Issue, SpecError

# Where a new profile goes in a model's mapping: after the first of these that the model has (the SLA is what
# the profile is read against), else at the end.
AFTER_KEYS = ("sla", "outputs", "inputs", "size")


def classic_block(rows: Sequence[BatchMeasurement], measured_on: str, measured_at: str) -> dict[str, Any]:
    """The classic profile of the usable rows (ascending batch sizes)."""
    full = rows[-1]
    return {"measured_on": measured_on, "measured_at": measured_at, "compute_ms": full.p99_ms,
            "rps_per_instance": full.throughput_rps,
            "batches": [{"batch_size": r.batch_size, "throughput_rps": r.throughput_rps, "p99_ms": r.p99_ms}
                        for r in rows]}


def llm_block(measurement: LlmMeasurement, load: LlmLoad, measured_on: str, measured_at: str,
              tensor_parallel: int) -> dict[str, Any]:
    """The LLM profile's measured fields, in spec/profiles.LLM_MEASURED's order."""
    return {"measured_on": measured_on, "measured_at": measured_at, "tensor_parallel": tensor_parallel,
            "concurrency": load.concurrency, "input_tokens": load.input_tokens, "output_tokens": load.output_tokens,
            "ttft_median_ms": measurement.ttft_median_ms, "ttft_p99_ms": measurement.ttft_p99_ms,
            "tpot_median_ms": measurement.tpot_median_ms, "tpot_p99_ms": measurement.tpot_p99_ms,
            "output_tokens_per_s": measurement.output_tokens_per_s}


def _yaml() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML()  # round-trip
    yaml.indent(mapping=2, sequence=4, offset=2)  # the style of models.yaml: "  - name:" under "models:"
    yaml.width = 4096  # never re-wrap a long line
    yaml.preserve_quotes = True
    return yaml


def _flow(values: dict[str, Any]) -> Any:
    """Batch rows as one-line flow mappings, as models.yaml writes tensors."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    out = {}
    for key, value in values.items():
        if isinstance(value, list):
            seq = CommentedSeq()
            for row in value:
                item = CommentedMap(row)
                item.fa.set_flow_style()
                seq.append(item)
            value = seq
        out[key] = value
    return out


def render_block(name: str, values: dict[str, Any]) -> str:
    """``values`` as the ``profile:`` block of model ``name``, for ``--print`` (what would be written)."""
    stream = io.StringIO()
    _yaml().dump({"profile": _flow(values)}, stream)
    return f"# models.yaml, model {name}:\n" + stream.getvalue()


def patch_profile(text: str, name: str, values: dict[str, Any], label: str = "models.yaml") -> str:
    """``text`` with model ``name``'s ``profile:`` given ``values`` (other keys kept), and nothing else changed."""
    from ruamel.yaml.comments import CommentedMap

    data = _yaml().load(text)
    entry = next((m for m in (data or {}).get("models", []) if isinstance(m, dict) and m.get("name") == name), None)
    if entry is None:
        raise SpecError([Issue(label, 0, 0, "models", f"no model named {name!r}", "check the name (modelfleet plan)")])
    profile = entry.get("profile")
    if not isinstance(profile, dict):
        profile = CommentedMap()
        after = next((k for k in AFTER_KEYS if k in entry), None)
        position = list(entry).index(after) + 1 if after else len(entry)
        entry.insert(position, "profile", profile)
    for key, value in _flow(values).items():
        profile[key] = value
    stream = io.StringIO()
    _yaml().dump(data, stream)
    return stream.getvalue()
