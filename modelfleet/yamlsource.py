"""YAML with positions: a node tree from PyYAML's C composer, turned into plain data plus a mark index.

Why not ``yaml.safe_load``: it silently keeps the last of two duplicate keys, reads ``no`` as false and
forgets where anything was. Composing keeps ``start_mark`` on every node at C speed (0.1 s for 1,000
models), so we check duplicates ourselves and can point every error at its line.

Scalars follow YAML 1.2 where 1.1 surprises people: only true/false are booleans (``no``, ``on`` stay
strings) and timestamps stay strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import yaml

from .errors import Issue, SpecError

Path = tuple[str | int, ...]

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
MAX_DEPTH = 64  # nothing in models.yaml nests deeper than ~8; this stops recursion bombs
MAX_NODES = 2_000_000  # stops alias "billion laughs" expansion long before memory runs out
_BOOL_WORDS = {"true", "false", "True", "False", "TRUE", "FALSE"}


def format_path(path: Path) -> str:
    """``("models", 3, "sla", "p99_latency_ms")`` -> ``models[3].sla.p99_latency_ms``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_path(text: str) -> Path:
    """The inverse of :func:`format_path`: ``models[3].sla`` -> ``("models", 3, "sla")``."""
    out: list[str | int] = []
    for part in text.replace("[", ".[").split("."):
        if part.startswith("[") and part.endswith("]") and part[1:-1].isdigit():
            out.append(int(part[1:-1]))
        elif part:
            out.append(part)
    return tuple(out)


@dataclass
class Document:
    """Plain data (dicts, lists, scalars) and, for every key and item, where it was written."""

    filename: str
    data: Any
    marks: dict[Path, tuple[int, int]] = field(default_factory=dict)
    #: Structural problems (duplicate keys, merge keys...) found while building; reported with the rest.
    issues: list[Issue] = field(default_factory=list)

    def locate(self, path: Path) -> tuple[int, int]:
        """Line and column of ``path``, or of its nearest written ancestor (e.g. for a missing key)."""
        for end in range(len(path), -1, -1):
            mark = self.marks.get(tuple(path[:end]))
            if mark:
                return mark
        return (1, 1)

    def issue(self, path: Path, message: str, fix: str = "") -> Issue:
        line, col = self.locate(path)
        return Issue(self.filename, line, col, format_path(path), message, fix)


def parse_yaml(text: str, filename: str) -> Document:
    """Parse one YAML document. Syntax errors raise SpecError; structural ones land in ``doc.issues``."""
    try:
        node = yaml.compose(text, Loader=_Loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        started = exc.context_mark.line + 1 if exc.context_mark and exc.problem_mark else None
        context = f" ({exc.context} on line {started})" if started and started != line else ""
        raise SpecError([Issue(filename, line, col, "", f"not valid YAML: {exc.problem or exc}{context}",
                               "fix the syntax at or before this position")]) from None
    except yaml.YAMLError as exc:
        raise SpecError([Issue(filename, 1, 1, "", f"not valid YAML: {exc}", "fix the syntax")]) from None
    doc = Document(filename, None)
    if node is None:
        return doc
    builder = _Builder(doc)
    doc.data = builder.build(node, (), 0)
    doc.issues = builder.issues
    return doc


class _Builder:
    def __init__(self, doc: Document) -> None:
        self.doc = doc
        self.issues: list[Issue] = []
        self.count = 0

    def _mark(self, node: yaml.Node) -> tuple[int, int]:
        return (node.start_mark.line + 1, node.start_mark.column + 1)

    def _fail(self, node: yaml.Node, path: Path, message: str, fix: str) -> None:
        line, col = self._mark(node)
        self.issues.append(Issue(self.doc.filename, line, col, format_path(path), message, fix))

    def build(self, node: yaml.Node, path: Path, depth: int) -> Any:
        self.count += 1
        if depth > MAX_DEPTH or self.count > MAX_NODES:
            if depth > MAX_DEPTH and self.count <= MAX_NODES:
                self._fail(node, path, f"nested deeper than {MAX_DEPTH} levels", "flatten the document")
            self.count = MAX_NODES + 1
            return None
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self._item(item, path + (i,), depth) for i, item in enumerate(node.value)]
        return self._scalar(node)

    def _item(self, node: yaml.Node, path: Path, depth: int) -> Any:
        self.doc.marks.setdefault(path, self._mark(node))
        return self.build(node, path, depth + 1)

    def _mapping(self, node: yaml.MappingNode, path: Path, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                self._fail(key_node, path, "merge keys (<<) are not supported", "write the keys out")
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self._fail(key_node, path, "keys must be plain strings", "use a plain key")
                continue
            key = str(key_node.value)
            if key in out:
                first = self.doc.marks.get(path + (key,), (0, 0))[0]
                self._fail(key_node, path + (key,), f"duplicate key {key!r} (first written on line {first})",
                           "keep one of them")
                continue
            self.doc.marks[path + (key,)] = self._mark(key_node)
            out[key] = self.build(value_node, path + (key,), depth + 1)
        return out

    def _scalar(self, node: yaml.ScalarNode) -> Any:
        tag = node.tag
        if tag == "tag:yaml.org,2002:bool" and node.value not in _BOOL_WORDS:
            return node.value  # YAML 1.1's yes/no/on/off stay strings (the "Norway problem")
        if tag in ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool",
                   "tag:yaml.org,2002:null"):
            return _CONSTRUCTOR.construct_object(node)
        return str(node.value)


def load_yaml(path: str) -> Document:
    """Read and parse a file; a missing or unreadable file is a SpecError, not a traceback."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Issue(path, 0, 0, "", f"cannot read file: {exc}", "check the path")]) from None
    return parse_yaml(text, path)
