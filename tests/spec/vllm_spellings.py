"""Spellings of vLLM flags as vLLM's parser accepts them (and some it refuses), for the extra_args tests: the pure
one (tests/spec/test_vllm_flags.py) and the one against vLLM's real parser (tests/engines/test_vllm_args.py).
Built from vLLM's own option table (modelfleet/data/vllm_flags.yaml), not from the checker's code."""

from __future__ import annotations

from pathlib import Path

import yaml
from hypothesis import strategies as st

TABLE: dict[str, str] = yaml.safe_load((Path(__file__).resolve().parents[2] / "modelfleet" / "data" /
                                        "vllm_flags.yaml").read_text())["flags"]
BENIGN = (("--seed", "0"), ("--max-logprobs", "5"), ("--enable-chunked-prefill",), ("--generation-config", "vllm"),
          ("--chat-template", "{% for m in messages %}{{ m.content }}{% endfor %}"), ("-O3",),
          ("--uvicorn-log-level", "warning"), ("--enforce-eager",))


def _abbreviations(option: str) -> list[str]:
    """Every prefix of a long option that still names it alone (argparse's allow_abbrev), the option itself too."""
    out = []
    for end in range(3, len(option) + 1):
        prefix = option[:end]
        if {TABLE[o] for o in TABLE if o.startswith(prefix) and o.startswith("--")} == {TABLE[option]}:
            out.append(prefix)
    return out or [option]


@st.composite
def spellings(draw, dests: frozenset[str] | None = None) -> list[str]:
    """One flag of ``dests`` (any flag when None), spelt one of the ways vLLM's parser takes it, with a value."""
    options = sorted(o for o, d in TABLE.items() if dests is None or d in dests)
    option = draw(st.sampled_from(options))
    value = draw(st.sampled_from(["2", "x", "{}", "auto", "/tmp/f", "https://example.com/t.jinja"]))
    if option.startswith("--"):
        flag = draw(st.sampled_from(_abbreviations(option)))
        if draw(st.booleans()):  # underscores for dashes, anywhere after the leading --
            flag = "--" + "".join(c if c != "-" or not draw(st.booleans()) else "_" for c in flag[2:])
        if draw(st.integers(0, 4)) == 0:
            flag = draw(st.sampled_from([flag.upper(), flag.title(), flag.swapcase()]))
        form = draw(st.sampled_from(["separate", "equals", "bare", "dotted"]))
        if form == "dotted":
            return [f"{flag}.{draw(st.sampled_from(['model', 'method', 'key']))}", value]
        return [f"{flag}={value}"] if form == "equals" else [flag] if form == "bare" else [flag, value]
    form = draw(st.sampled_from(["separate", "equals", "glued", "bare"]))
    flag = option.upper() if draw(st.integers(0, 4)) == 0 else option
    return {"separate": [flag, value], "equals": [f"{flag}={value}"], "glued": [flag + value], "bare": [flag]}[form]


@st.composite
def argument_lists(draw, dests: frozenset[str] | None = None) -> list[str]:
    """Benign flags around one or two generated spellings, the flag repeated sometimes (vLLM keeps the last)."""
    before = draw(st.lists(st.sampled_from(BENIGN), max_size=2))
    flag = draw(spellings(dests))
    again = draw(spellings(dests)) if draw(st.booleans()) else []
    after = draw(st.lists(st.sampled_from(BENIGN), max_size=2))
    return [t for group in (*before, flag, *after, again) for t in group]
