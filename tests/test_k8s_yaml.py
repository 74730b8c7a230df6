"""dump_yaml writes with libyaml where its bytes are PyYAML's, and with PyYAML's Python emitter elsewhere: the
manifests never depend on which emitter ran."""

from __future__ import annotations

import re
import string
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.render.k8s import dump_yaml, yaml_dump
from modelfleet.render.manifests import render_fleet_manifests
from tests.conftest import STACKS

pytestmark = pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML built without libyaml: one emitter only")


class PythonDumper(yaml.SafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


class LibyamlDumper(yaml.CSafeDumper):
    def ignore_aliases(self, data: Any) -> bool:
        return True


for _dumper in (PythonDumper, LibyamlDumper):  # the string representer dump_yaml's two dumpers share
    _dumper.add_representer(str, yaml_dump.represent_str)


def python_emitter(documents: list[Any]) -> bytes:
    return yaml.dump_all(documents, Dumper=PythonDumper, sort_keys=True, default_flow_style=False).encode()


def libyaml_emitter(documents: list[Any]) -> bytes:
    return yaml.dump_all(documents, Dumper=LibyamlDumper, sort_keys=True, default_flow_style=False).encode()


PRINTABLE = string.ascii_letters + string.digits + string.punctuation + " "


def no_space_beside_a_break(text: str) -> str:
    return re.sub(r" *\n *", "\n", text)


# Long texts, so that both emitters fold them at the 80-column width: words and separators.
words = st.lists(st.tuples(st.text(PRINTABLE, min_size=1, max_size=15), st.sampled_from([" ", "  ", "\n", "\n\n"])),
                 max_size=40).map(lambda parts: no_space_beside_a_break("".join(w + s for w, s in parts)))
lines = st.text(PRINTABLE + "\n\n\n", max_size=300).map(no_space_beside_a_break)
scalars = (st.none() | st.booleans() | st.integers() | st.floats() | words | lines
           | st.sampled_from(["", "null", "~", "yes", "no", "on", "0x1f", "1e3", "12:30", "-", "---", "...", "a: b",
                              "a #b", "- x", "'q'", '"q"', "<<", "=", "?", "|", ">", "%x", "@x", "!x", "&x", "*x"]))
keys = st.text(PRINTABLE, min_size=1, max_size=127) | st.sampled_from(["apiVersion", "kind", "metadata", "spec"])
nodes = st.recursive(scalars, lambda children: st.lists(children, max_size=4)
                     | st.dictionaries(keys, children, max_size=5), max_leaves=30)
documents = st.lists(st.dictionaries(keys, nodes, min_size=1, max_size=6), min_size=1, max_size=3)


@settings(max_examples=400, deadline=None)
@given(docs=documents)
def test_where_the_fast_emitter_writes_its_bytes_are_pythons(docs):
    assert yaml_dump.emits_alike(docs)
    assert libyaml_emitter(docs) == python_emitter(docs)
    assert dump_yaml(docs) == python_emitter(docs)


# Programs: lines of printable text, indented, none ending in a space, with or without a final line break.
programs = st.tuples(st.lists(st.tuples(st.sampled_from(["", "  ", "    ", "        "]),
                                        st.text(PRINTABLE, max_size=100).map(lambda line: line.strip(" "))),
                              min_size=2, max_size=12),
                     st.sampled_from(["", "\n", "\n\n"])).map(
    lambda parts: "\n".join(indent + line for indent, line in parts[0]).lstrip(" \n") + parts[1])


@settings(max_examples=400, deadline=None)
@given(program=programs)
def test_an_indented_program_is_a_literal_block_both_emitters_write_alike(program):
    docs = [{"data": {"program.py": program}, "command": ["python3", "-c", program]}]
    assert yaml_dump.emits_alike(docs) == (yaml_dump._quotable(program) or yaml_dump._literal(program))
    if yaml_dump.emits_alike(docs):
        assert libyaml_emitter(docs) == python_emitter(docs)
    assert dump_yaml(docs) == python_emitter(docs)
    assert list(yaml.safe_load_all(dump_yaml(docs))) == docs


def test_the_staging_program_is_written_as_the_file_it_is():
    from modelfleet.render.k8s.staging import SCRIPT
    text = SCRIPT.read_text()
    written = dump_yaml([{"data": {SCRIPT.name: text}}]).decode()
    assert written.startswith(f"data:\n  {SCRIPT.name}: |\n") and "    def stage(" in written


# Where the two emitters differ, measured: each of these makes libyaml write other bytes than PyYAML.
DIVERGING = {
    "empty key": [{"": "x"}],
    "128-character key": [{"k" * 128: "x"}],
    "long escaped string": [{"a": "tab\there " * 12}],
    "long non-ASCII string": [{"a": "caf\u00e9 " * 20}],
    "space before a line break": [{"a": "x " * 30 + "\n" + "y " * 30}],
    "space after a line break": [{"a": "x" * 3 + "\n " + "y " * 50}],
}


@pytest.mark.parametrize("name", DIVERGING)
def test_where_the_emitters_differ_the_python_emitter_writes(name):
    docs = DIVERGING[name]
    assert libyaml_emitter(docs) != python_emitter(docs), "no longer a divergence: the case proves nothing"
    assert not yaml_dump.emits_alike(docs)
    assert dump_yaml(docs) == python_emitter(docs)


@pytest.mark.parametrize("stack", STACKS)
def test_every_manifest_of_the_examples_takes_the_fast_emitter(project, stack):
    """The speed-up reaches the real objects (init-container scripts included), not only the fuzzed ones."""
    for workload, objects in render_fleet_manifests(project.plan(stack), project.environment(stack).deploy).items():
        assert yaml_dump.emits_alike(objects), workload
        assert dump_yaml(objects) == python_emitter(objects), workload
