"""Kubernetes objects as YAML text: keys sorted, block style, every object written out in full.

libyaml's emitter (``yaml.CSafeDumper``: the same Python representer and resolver) is five times faster than
PyYAML's Python emitter, which was 95% of ``render_kubernetes`` at 1,000 models. The two emitters write the
same bytes for the data ``emits_alike`` admits, which is what Kubernetes objects hold (an indented program,
such as the staging Job's, is written by both as a literal block); they differ elsewhere
(how they fold long escaped double-quoted strings, where a key becomes ``? key``), and there the Python
emitter writes. So the manifests never depend on which emitter ran, nor on whether PyYAML has libyaml.

On the libyaml path, the node graph is built here (``_Nodes``) rather than by PyYAML's representer, in the same
walk that checks ``emits_alike``, and each distinct scalar's implicit tag is resolved once (``_resolve``): the
representer and the resolver's regexes were three quarters of the dump. The nodes are those the representer
builds (tags, values, styles, keys sorted, block style), handed to the same C serializer and emitter, so the
bytes are the same; a value of another type (a float, a tuple) is represented by PyYAML itself.
"""

from __future__ import annotations

import io
from functools import lru_cache
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from ...spec.yaml_source import simple_key


def _literal(text: str) -> bool:
    """Lines of printable ASCII, none ending in a space, the first not starting with one or empty: a program
    (indented) that both emitters write the same as a literal block (``|``)."""
    if "\n" not in text or not text.isascii() or text.startswith((" ", "\n")):
        return False
    return all(line.isprintable() and not line.endswith(" ") for line in text.split("\n"))


def represent_str(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    """An indented program (a space beside a line break: not ``_quotable``) as a literal block, readable as the
    file it is; every other string as PyYAML writes it."""
    if not _quotable(text) and _literal(text):
        return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|")
    return dumper.represent_str(text)


class _PlainDumper(yaml.SafeDumper):
    """Every object written out in full: a dict shared by two probes must not become ``&id001`` / ``*id001``
    (valid YAML, but not what a reviewer expects to read, nor what every tool resolves)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


_PlainDumper.add_representer(str, represent_str)


@lru_cache(maxsize=1 << 16)
def _resolve(value: str, implicit: tuple[bool, bool]) -> str:
    """The implicit tag of a plain (or quoted) scalar ``value``: the resolver's regexes, once per distinct text."""
    return yaml.resolver.Resolver.resolve(_RESOLVER, ScalarNode, value, implicit)


_RESOLVER = yaml.resolver.Resolver()


def _libyaml_dumper() -> type | None:
    if not getattr(yaml, "__with_libyaml__", False):
        return None

    class _FastPlainDumper(yaml.CSafeDumper):
        ignore_aliases = _PlainDumper.ignore_aliases

        def resolve(self, kind: type, value: Any, implicit: Any) -> str:
            if kind is ScalarNode and not self.yaml_path_resolvers:
                return _resolve(value, implicit)
            return super().resolve(kind, value, implicit)

    _FastPlainDumper.add_representer(str, represent_str)
    return _FastPlainDumper


_FAST_DUMPER = _libyaml_dumper()


def _quotable(text: str) -> bool:
    """Printable ASCII lines with no space beside a line break: written plain or single-quoted, never as an
    escaped double-quoted string (init containers' shell scripts are such text)."""
    return text.isascii() and text.replace("\n", "").isprintable() and " \n" not in text and "\n " not in text


def emits_alike(node: Any) -> bool:
    """Whether both emitters write ``node`` the same: mappings with short one-line printable-ASCII keys,
    lists, quotable strings, programs as literal blocks, numbers, booleans and nulls."""
    if isinstance(node, str):
        return _quotable(node) or _literal(node)
    if isinstance(node, dict):
        return all(simple_key(key) and emits_alike(value)
                   for key, value in node.items())
    if isinstance(node, list):
        return all(emits_alike(item) for item in node)
    return node is None or type(node) in (bool, int, float)


_STR, _INT, _BOOL, _NULL = (f"tag:yaml.org,2002:{t}" for t in ("str", "int", "bool", "null"))
_MAP, _SEQ = "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq"


class _Unlike(Exception):
    """A value the two emitters may write differently (see ``emits_alike``): the Python emitter writes the file."""


class _Nodes:
    """The node graph PyYAML's representer builds for ``data`` (``sort_keys=True``, ``default_flow_style=False``,
    every object in full, ``represent_str``), raising ``_Unlike`` where ``emits_alike`` would be false."""

    def __init__(self, dumper: yaml.CSafeDumper) -> None:
        self.dumper = dumper

    def node(self, data: Any) -> yaml.Node:
        kind = type(data)
        if kind is str:
            if _quotable(data):
                return ScalarNode(_STR, data)
            if _literal(data):
                return ScalarNode(_STR, data, style="|")
            raise _Unlike
        if kind is dict:
            pairs = []
            for key, value in sorted(data.items()):
                if not simple_key(key):
                    raise _Unlike
                pairs.append((ScalarNode(_STR, key), self.node(value)))
            return MappingNode(_MAP, pairs, flow_style=False)
        if kind is list:
            return SequenceNode(_SEQ, [self.node(item) for item in data], flow_style=False)
        if kind is bool:
            return ScalarNode(_BOOL, "true" if data else "false")
        if kind is int:
            return ScalarNode(_INT, str(data))
        if data is None:
            return ScalarNode(_NULL, "null")
        if kind is float:
            return self.dumper.represent_data(data)
        raise _Unlike


def dump_yaml(documents: list[dict[str, Any]]) -> bytes:
    """One multi-document YAML file: libyaml writes it when its bytes are the Python emitter's."""
    fast = _libyaml_text(documents)
    if fast is None:
        fast = yaml.dump_all(documents, Dumper=_PlainDumper, sort_keys=True, default_flow_style=False)
    return fast.encode()


def _libyaml_text(documents: list[dict[str, Any]]) -> str | None:
    """``documents`` written by libyaml, or None where the Python emitter must write them (``emits_alike``)."""
    if _FAST_DUMPER is None or not all(isinstance(d, dict) for d in documents):
        return None
    stream = io.StringIO()
    dumper = _FAST_DUMPER(stream, sort_keys=True, default_flow_style=False)
    try:
        nodes = [_Nodes(dumper).node(d) for d in documents]
        dumper.open()
        for node in nodes:
            dumper.serialize(node)
        dumper.close()
    except _Unlike:
        return None
    finally:
        dumper.dispose()
    return stream.getvalue()
