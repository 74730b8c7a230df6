"""spec/yaml_source.safe_dump: libyaml writes the data both emitters write alike, and those bytes are the Python
emitter's; the lock (its main user) reads back as it was written."""

from __future__ import annotations

import string

import yaml
from hypothesis import given
from hypothesis import strategies as st

from modelfleet.spec import yaml_source
from modelfleet.spec.yaml_source import one_line_data, parse_yaml, safe_dump

PRINTABLE = string.printable.replace("\n", "").replace("\r", "").replace("\t", "").replace("\x0b", "").replace("\x0c", "")
scalars = (st.none() | st.booleans() | st.integers() | st.text(PRINTABLE, max_size=160)
           | st.sampled_from(["", "null", "~", "yes", "no", "on", "0x1f", "1e3", "573431241e710825", "12:30", "-",
                              "---", "a: b", "# c", "'q'", '"d"', "g6e.xlarge", "triton-g5-xlarge"]))
keys = st.text(PRINTABLE, min_size=1, max_size=127) | st.sampled_from(["stacks", "classic", "llms", "tp", "digest"])
data = st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                    | st.dictionaries(keys, children, max_size=5), max_leaves=30)


@given(value=st.dictionaries(keys, data, max_size=6), width=st.sampled_from([80, 120]))
def test_where_libyaml_writes_its_bytes_are_the_python_emitters(value, width):
    assert one_line_data(value)
    options = {"sort_keys": True, "default_flow_style": False, "width": width}
    assert safe_dump(value, **options) == yaml.dump(value, Dumper=yaml_source._Dumper, **options)
    assert yaml.dump(value, Dumper=yaml_source._CDumper, **options) == safe_dump(value, **options)


@given(value=data)
def test_what_safe_dump_writes_reads_back_as_it_was(value):
    document = {"root": value}
    assert parse_yaml(safe_dump(document, sort_keys=True, default_flow_style=False), "x.yaml").data == document


def test_other_data_is_left_to_the_python_emitter():
    for value in ({"k": "two\nlines"}, {"k": "é"}, {"k" * 128: 1}, {"k": 1.5}, {1: "a"}, {"k": ("a",)}):
        assert not one_line_data(value)
