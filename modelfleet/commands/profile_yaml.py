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

Two guards make "nothing else changes" true of any file, not only of models.yaml's own style:

- The block is written only into the model's own mapping. A ``profile:`` shared through an anchor (``profile:
  *measured``, or an anchored one another model aliases), one inherited through a merge key (``<<: *base``),
  one that merges another mapping, or a model that is itself an alias is refused with the line: writing there
  would hand the figures to models that were never measured.
- The file's indentation is kept: the dump is tried in the file's own style (ruamel's guess, then the common
  ones) and accepted only when every line outside the written block is byte-identical; otherwise the file is
  refused and left alone (``--print`` shows the block to paste).
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
    span = written_span(text, name, label)
    for indent in _indents(text):
        patched = _patched(text, name, values, indent)
        if _only_span_changed(text, patched, span):
            return patched
    line = span[0] + 1
    raise SpecError([Issue(label, line, 1, f"models[{name}].profile", "cannot write the profile without changing "
                           "lines outside it (an indentation or style the YAML writer does not keep)",
                           "paste the block `modelfleet profile ... --print` shows, or indent mappings by 2 and "
                           "sequences as `  - `")])


def _patched(text: str, name: str, values: dict[str, Any], indent: tuple[int, int, int]) -> str:
    from ruamel.yaml.comments import CommentedMap

    yaml = _yaml()
    yaml.indent(mapping=indent[0], sequence=indent[1], offset=indent[2])
    data = yaml.load(text)
    entry = next(m for m in data["models"] if isinstance(m, dict) and m.get("name") == name)
    profile = entry.get("profile")
    if not isinstance(profile, dict):
        profile = CommentedMap()
        own = [k for k in entry if k in getattr(entry, "_ok", entry)]  # its own keys, not a merge's
        after = next((k for k in AFTER_KEYS if k in own), None)
        position = own.index(after) + 1 if after else len(own)
        entry.insert(position, "profile", profile)
    for key, value in _flow(values).items():
        profile[key] = value
    stream = io.StringIO()
    yaml.dump(data, stream)
    return stream.getvalue()


def _indents(text: str) -> list[tuple[int, int, int]]:
    """(mapping, sequence, offset) styles to try: the file's own as ruamel guesses it, then the common ones."""
    from ruamel.yaml.util import load_yaml_guess_indent

    styles = [(2, 4, 2)] + [(mapping, offset + 2, offset) for mapping in (2, 4, 3) for offset in (0, 2, 4, 1, 3)]
    try:
        _, mapping, offset = load_yaml_guess_indent(text)
        if mapping and offset is not None:
            styles.insert(0, (mapping, mapping + offset, offset))
    except Exception:  # a guess only; the styles below are tried anyway
        pass
    return list(dict.fromkeys(styles))


def _only_span_changed(before: str, after: str, span: tuple[int, int]) -> bool:
    """Every line before ``span[0]`` and from ``span[1]`` on (lines of ``before``) is in ``after`` unchanged."""
    old, new = before.splitlines(keepends=True), after.splitlines(keepends=True)
    head, tail = old[:span[0]], old[span[1]:]
    return len(new) >= len(head) + len(tail) and new[:len(head)] == head and new[len(new) - len(tail):] == tail


# ------------------------------------------------------------------------------------------------ where
def written_span(text: str, name: str, label: str) -> tuple[int, int]:
    """The lines (0-based, end exclusive) of ``text`` that writing model ``name``'s profile may change: its own
    ``profile:`` block, or the empty span where a new one goes. Refuses (SpecError, with the line) a profile
    that is not the model's own to write."""
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise SpecError([Issue(label, 1, 1, "", f"not readable YAML: {exc}", "fix the file, then profile again")]) from None
    model = _model_node(root, name)
    if model is None:
        raise SpecError([Issue(label, 0, 0, "models", f"no model named {name!r}", "check the name (modelfleet plan)")])
    if problem := _shared_problem(root, model, name):
        node, message = problem
        raise SpecError([Issue(label, node.start_mark.line + 1, node.start_mark.column + 1, f"models[{name}].profile",
                               message, "give the model a profile: of its own (write the mapping out under it, "
                               "without an anchor or alias), then profile again")])
    own = dict(_own_items(model))
    if "profile" in own:
        key, value = own["profile"]
        return key.start_mark.line, _end_line(key, value)
    after = next((own[k] for k in AFTER_KEYS if k in own), None)
    line = _end_line(*after) if after is not None else _end_line(None, model)
    return line, line


def _model_node(root: Any, name: str) -> Any:
    import yaml

    if not isinstance(root, yaml.MappingNode):
        return None
    models = dict(_own_items(root)).get("models", (None, None))[1]
    for item in models.value if isinstance(models, yaml.SequenceNode) else ():
        found = dict(_own_items(item)).get("name") if isinstance(item, yaml.MappingNode) else None
        if found is not None and isinstance(found[1], yaml.ScalarNode) and found[1].value == name:
            return item
    return None


def _own_items(node: Any) -> list[tuple[str, tuple[Any, Any]]]:
    """A mapping node's own keys (merge keys left out): (key, (key node, value node))."""
    import yaml

    return [(k.value, (k, v)) for k, v in node.value
            if isinstance(k, yaml.ScalarNode) and k.tag != "tag:yaml.org,2002:merge"]


def _shared_problem(root: Any, model: Any, name: str) -> tuple[Any, str] | None:
    """Why model ``name``'s profile is not its own to write (the node to point at, the message), or None."""
    uses = _uses(root)
    if uses[id(model)] > 1:
        return model, (f"model {name}'s mapping is anchored and used again (aliased or merged by another model): "
                       "writing its profile would change that model's too")
    own = dict(_own_items(model))
    if "profile" not in own:
        merge = next(((k, v) for k, v in model.value if k.tag == "tag:yaml.org,2002:merge" and _merges_key(v, "profile")),
                     None)
        if merge:
            return merge[0], (f"model {name}'s profile: comes from the merge key (<<) on this line (anchored on line "
                              f"{_merged_line(merge[1])}): writing it would change every model that merges it")
        return None
    _, value = own["profile"]
    if uses[id(value)] > 1:
        return value, (f"model {name}'s profile: is shared through an anchor and alias (the mapping written on line "
                       f"{value.start_mark.line + 1}): writing it would change every model that uses it")
    if any(k.tag == "tag:yaml.org,2002:merge" for k, _ in getattr(value, "value", ()) if hasattr(k, "tag")):
        return value, f"model {name}'s profile: merges another mapping (<<): its figures would mix with that one's"
    return None


def _uses(root: Any) -> dict[int, int]:
    """How many times each node is reached from ``root``: more than once means anchored and aliased."""
    from collections import Counter

    import yaml

    uses: Counter[int] = Counter()
    pending = [root]
    while pending:
        node = pending.pop()
        uses[id(node)] += 1
        if uses[id(node)] > 1:
            continue
        if isinstance(node, yaml.MappingNode):
            pending.extend(n for pair in node.value for n in pair)
        elif isinstance(node, yaml.SequenceNode):
            pending.extend(node.value)
    return uses


def _merges_key(value: Any, key: str) -> bool:
    """A merge key's value (a mapping, or a list of them) provides ``key``, itself or through its own merges."""
    import yaml

    sources = value.value if isinstance(value, yaml.SequenceNode) else [value]
    for source in sources:
        if isinstance(source, yaml.MappingNode):
            if key in dict(_own_items(source)):
                return True
            if any(k.tag == "tag:yaml.org,2002:merge" and _merges_key(v, key) for k, v in source.value):
                return True
    return False


def _merged_line(value: Any) -> int:
    import yaml

    first = value.value[0] if isinstance(value, yaml.SequenceNode) and value.value else value
    return first.start_mark.line + 1


def _end_line(key: Any, node: Any) -> int:
    """The first line after ``node``: a block collection (or block scalar) ends where the next token starts,
    with only indentation before it on that line (not its own); a flow collection or plain scalar ends on its
    own last line. An alias ends on its key's line (its node, and marks, are the anchor's)."""
    if key is not None and node.start_mark.index < key.end_mark.index:  # an alias: the node is its anchor's
        return key.end_mark.line + 1
    mark = node.end_mark
    before = mark.buffer[mark.pointer - mark.column:mark.pointer] if mark.buffer else "x"
    return mark.line if not before.strip() else mark.line + 1
