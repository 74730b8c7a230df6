"""render.fleet.to_json writes what ``json.dumps(indent=2, sort_keys=True, ensure_ascii=False)`` writes, for
any data: its own encoder where the data is plain JSON, json.dumps elsewhere."""

from __future__ import annotations

import json
from enum import IntEnum
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.render.fleet import to_json


def reference(data: Any) -> bytes:
    return (json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


class Level(IntEnum):
    LOW = 1


scalars = (st.none() | st.booleans() | st.integers() | st.floats() | st.text()
           | st.sampled_from(["", "é", "\u2028", "\x00", '"', "\\", "\ud7ff", Level.LOW]))
keys = st.text() | st.sampled_from(["", "a", "é", "\n", "\x7f"])
plain = st.recursive(scalars, lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=5),
                     max_leaves=40)
# keys json.dumps converts (numbers, booleans, None): only alone in a mapping, as sorting mixed keys fails in both
odd = st.recursive(scalars, lambda children: st.lists(children, max_size=3) | st.tuples(children, children)
                   | st.dictionaries(st.integers() | st.floats(allow_nan=False), children, max_size=3),
                   max_leaves=12)


@settings(max_examples=500, deadline=None)
@given(data=plain)
def test_plain_json_is_written_as_json_dumps_writes_it(data):
    assert to_json(data) == reference(data)


@settings(max_examples=200, deadline=None)
@given(data=odd)
def test_other_data_falls_back_to_json_dumps(data):
    assert to_json(data) == reference(data)


def test_a_plan_document_is_written_alike(plans):
    from modelfleet.render.fleet import plan_document

    for plan in plans.values():
        document = plan_document(plan)
        assert to_json(document) == reference(document)
