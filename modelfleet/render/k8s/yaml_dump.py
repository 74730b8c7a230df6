"""Kubernetes objects as YAML text: keys sorted, block style, every object written out in full.

libyaml's emitter (``yaml.CSafeDumper``: the same Python representer and resolver) is five times faster than
PyYAML's Python emitter, which was 95% of ``render_kubernetes`` at 1,000 models. The two emitters write the
same bytes for the data ``emits_alike`` admits, which is what Kubernetes objects hold (an indented program,
such as the staging Job's, is written by both as a literal block); they differ elsewhere
(how they fold long escaped double-quoted strings, where a key becomes ``? key``), and there the Python
emitter writes. So the manifests never depend on which emitter ran, nor on whether PyYAML has libyaml.
"""

from __future__ import annotations

from typing import Any

import yaml

# PyYAML writes a key of 128 characters or more, or an empty one, as "? key"; libyaml only from 129 characters.
SIMPLE_KEY_LIMIT = 128


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


def _libyaml_dumper() -> type | None:
    if not getattr(yaml, "__with_libyaml__", False):
        return None

    class _FastPlainDumper(yaml.CSafeDumper):
        ignore_aliases = _PlainDumper.ignore_aliases

    _FastPlainDumper.add_representer(str, represent_str)
    return _FastPlainDumper


_FAST_DUMPER = _libyaml_dumper()


def _one_line(text: str) -> bool:
    """Printable ASCII on one line: a key both emitters write the same."""
    return text.isascii() and text.isprintable()


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
        return all(isinstance(key, str) and 0 < len(key) < SIMPLE_KEY_LIMIT and _one_line(key) and emits_alike(value)
                   for key, value in node.items())
    if isinstance(node, list):
        return all(emits_alike(item) for item in node)
    return node is None or type(node) in (bool, int, float)


def dump_yaml(documents: list[dict[str, Any]]) -> bytes:
    """One multi-document YAML file: libyaml writes it when its bytes are the Python emitter's."""
    fast = _FAST_DUMPER is not None and all(isinstance(d, dict) and emits_alike(d) for d in documents)
    return yaml.dump_all(documents, Dumper=_FAST_DUMPER if fast else _PlainDumper, sort_keys=True,
                         default_flow_style=False).encode()
