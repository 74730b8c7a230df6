"""YAML with positions: a node tree from PyYAML's C composer, turned into plain data plus a mark index.

Why not ``yaml.safe_load``: it silently keeps the last of two duplicate keys, reads ``no`` as false and
forgets where anything was. Composing keeps ``start_mark`` on every node at C speed (0.1 s for 1,000
models), so we check duplicates ourselves and can point every error at its line.

Scalars follow YAML 1.2 where 1.1 surprises people: only true/false are booleans (``no``, ``on`` stay
strings), timestamps and ``1:30`` stay strings, ``010`` is ten and ``1e3`` is a number. A scalar that cannot
be read as what it is tagged (``!!int abc``, a 5,000-digit number, ``1.0e+400``) is a located issue.

Merge keys (``<<: *defaults``, ``<<: [*a, *b]``) work as YAML's merge type: the merged mappings' keys are added
where the mapping does not write them, the earlier of several merges winning; each merged value keeps the
line it is written on, and a merge of anything but mappings is one located issue. Anchors and aliases
(merged ones included) are expanded, within a budget: the aliases of a document may add at most
``max(ALIAS_BUDGET, one value per byte of the file)`` values, so a "billion laughs" document stops at its
first oversized alias in milliseconds instead of eating memory; it is reported at that alias's target.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ..errors import Issue, SpecError

Path = tuple[str | int, ...]

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CONSTRUCTOR = yaml.constructor.SafeConstructor()
MAX_DEPTH = 64  # nothing in models.yaml nests deeper than ~8; this stops recursion bombs
MAX_NODES = 2_000_000  # values in one document, aliases expanded (3,000 models are ~150,000)
ALIAS_BUDGET = 100_000  # values aliases may add, at least; more for a larger file (see the module docstring)
MAX_DIGITS = 100  # no setting needs 20; longer numbers stop here, far below Python's int-string limit
_BOOL_WORDS = {"true", "false", "True", "False", "TRUE", "FALSE"}
_FLOAT_12 = re.compile(r"^[-+]?(\.[0-9]+|[0-9][0-9_]*(\.[0-9_]*)?)([eE][-+]?[0-9]+)?$")  # YAML 1.2, plus _
_NUMBER_STARTS = frozenset("0123456789+-.")
MERGE_TAG = "tag:yaml.org,2002:merge"


class _Stop(Exception):
    """The document is too deep or expands too far: building stops at once (its issue is recorded)."""

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
    #: Paths whose scalar could not be read (their issue is in ``issues``); validation errors there repeat it.
    unreadable: set[Path] = field(default_factory=set)
    #: Mappings whose merge key (<<) could not be read: keys "missing" under them came from the merge.
    incomplete: set[Path] = field(default_factory=set)

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
    builder = _Builder(doc, alias_budget=max(ALIAS_BUDGET, len(text)))
    try:
        doc.data = builder.build(node, (), 0)
    except _Stop:
        raise SpecError(builder.issues) from None
    doc.issues = builder.issues
    return doc


class _Builder:
    def __init__(self, doc: Document, alias_budget: int) -> None:
        self.doc = doc
        self.issues: list[Issue] = []
        self.count = 0
        self.alias_budget = alias_budget
        self.built: set[int] = set()  # ids of nodes already built: meeting one again is an alias
        self.sizes: dict[int, int] = {}  # expanded size of aliased nodes, memoised
        self.expanding = False  # inside an alias being expanded

    def _mark(self, node: yaml.Node) -> tuple[int, int]:
        return (node.start_mark.line + 1, node.start_mark.column + 1)

    def _fail(self, node: yaml.Node, path: Path, message: str, fix: str) -> None:
        line, col = self._mark(node)
        self.issues.append(Issue(self.doc.filename, line, col, format_path(path), message, fix))

    def build(self, node: yaml.Node, path: Path, depth: int) -> Any:
        self.count += 1
        if depth > MAX_DEPTH or self.count > MAX_NODES:
            self._stop_at(node, path, depth)
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        alias = self._alias(node, path)
        self.expanding |= alias
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path, depth)
            return [self._item(item, path + (i,), depth) for i, item in enumerate(node.value)]
        finally:
            self.expanding ^= alias

    def _stop_at(self, node: yaml.Node, path: Path, depth: int) -> None:
        if depth > MAX_DEPTH:
            self._fail(node, path, f"nested deeper than {MAX_DEPTH} levels", "flatten the document")
        else:
            self._fail(node, path, f"the document holds more than {MAX_NODES:,} values", "split the catalogue")
        raise _Stop

    def _alias(self, node: yaml.Node, path: Path) -> bool:
        """True when ``node`` was built before: an alias whose expansion starts here (the aliases inside it
        are paid for by its size). Stops before an expansion past the budget."""
        key = id(node)
        if self.expanding or key not in self.built:
            self.built.add(key)
            return False
        size = _expanded_size(node, self.sizes, 0)
        self.alias_budget -= size
        if self.alias_budget < 0 or self.count + size > MAX_NODES:
            self._fail(node, path, f"an alias here expands to {size:,} values: more than a document of "
                       f"this size may add through anchors and aliases", "write the values out, or nest "
                       "fewer aliases inside aliases")
            raise _Stop
        return True

    def _item(self, node: yaml.Node, path: Path, depth: int) -> Any:
        self.doc.marks.setdefault(path, self._mark(node))
        return self.build(node, path, depth + 1)

    def _mapping(self, node: yaml.MappingNode, path: Path, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        merges = []
        for key_node, value_node in node.value:
            if key_node.tag == MERGE_TAG:
                merges.append((key_node, value_node))
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
        for key_node, value_node in merges:
            self._merge(out, key_node, value_node, path, depth)
        return out

    def _merge(self, out: dict[str, Any], key_node: yaml.Node, value_node: yaml.Node, path: Path, depth: int) -> None:
        """``<<: *a`` or ``<<: [*a, *b]``: add the keys ``out`` does not have yet (written keys and earlier
        merges win), each located where it is written."""
        sources = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
        if not sources or not all(isinstance(s, yaml.MappingNode) for s in sources):
            kind = "an empty list" if not sources else _kind(next(s for s in sources if not isinstance(s, yaml.MappingNode)))
            self._fail(key_node, path, f"a merge key (<<) takes a mapping or a list of mappings, not {kind}",
                       "merge an anchored mapping (`<<: *defaults`), or write the keys out")
            self.doc.incomplete.add(path)  # its keys would have come from the merge: no "missing" for them
            return
        for source in sources:
            marks, self.doc.marks = self.doc.marks, {}
            try:
                merged = self.build(source, path, depth)
            finally:
                found, self.doc.marks = self.doc.marks, marks
            for key, value in merged.items():
                if key not in out:
                    out[key] = value
                    self.doc.marks.update((p, m) for p, m in found.items() if p[len(path):len(path) + 1] == (key,))

    def _scalar(self, node: yaml.ScalarNode, path: Path) -> Any:
        tag, value = node.tag, node.value
        if tag == "tag:yaml.org,2002:bool":
            return value.lower() == "true" if value in _BOOL_WORDS else value  # yes/no/on/off stay strings
        if tag == "tag:yaml.org,2002:null":
            return None
        if tag == "tag:yaml.org,2002:int":
            return self._int(node, path)
        if tag == "tag:yaml.org,2002:float" or (tag == "tag:yaml.org,2002:str" and not node.style
                                                  and value[:1] in _NUMBER_STARTS and _FLOAT_12.match(value)):
            return self._float(node, path)
        return str(value)

    def _int(self, node: yaml.ScalarNode, path: Path) -> Any:
        value = node.value
        if ":" in value:
            return value  # YAML 1.1 base 60 (1:30 = 90) surprises: a string, as in YAML 1.2
        digits = value.lstrip("+-").replace("_", "")
        if len(digits) > MAX_DIGITS:
            return self._unreadable(node, path, f"a number of {len(digits):,} digits is far too large",
                                    "write a number within the setting's range (see `modelfleet schema`)")
        if digits.isascii() and digits.isdigit():
            return int(value.replace("_", ""), 10)  # decimal, as YAML 1.2 reads 010 too
        try:
            return _CONSTRUCTOR.construct_object(node)  # 0x1F, 0b101, or a !!int tag on something else
        except ValueError:
            return self._unreadable(node, path, f"{value!r} is not a whole number (it is tagged !!int)",
                                    "write a whole number such as 8, or drop the tag")

    def _float(self, node: yaml.ScalarNode, path: Path) -> Any:
        value = node.value
        if len(value) > MAX_DIGITS + 10:
            return self._unreadable(node, path, f"a number written with {len(value):,} characters is too long",
                                    "write a number within the setting's range (see `modelfleet schema`)")
        if ":" in value:
            return value  # YAML 1.1 base 60 again (1:30.5)
        text = value.replace("_", "").lower()
        try:
            number = float(text.replace(".inf", "inf").replace(".nan", "nan"))
        except ValueError:
            return self._unreadable(node, path, f"{value!r} is not a number (it is tagged !!float)",
                                    "write a number such as 0.5, or drop the tag")
        if math.isinf(number) and "inf" not in value.lower():
            return self._unreadable(node, path, f"{value} is too large to be a number",
                                    "write a number within the setting's range (see `modelfleet schema`)")
        return number

    def _unreadable(self, node: yaml.ScalarNode, path: Path, message: str, fix: str) -> str:
        self._fail(node, path, message, fix)
        self.doc.unreadable.add(path)
        return str(node.value)


def _kind(node: yaml.Node) -> str:
    if isinstance(node, yaml.SequenceNode):
        return "a list"
    return "null" if node.tag == "tag:yaml.org,2002:null" else f"the value {node.value!r}"


def _expanded_size(node: yaml.Node, sizes: dict[int, int], depth: int) -> int:
    """Values ``node`` becomes once every alias inside it is expanded (memoised: linear in the file)."""
    if isinstance(node, yaml.ScalarNode) or depth > MAX_DEPTH:
        return 1
    known = sizes.get(id(node))
    if known is None:
        children = (part for pair in node.value for part in pair) if isinstance(node, yaml.MappingNode) else node.value
        known = 1 + sum(_expanded_size(child, sizes, depth + 1) for child in children)
        sizes[id(node)] = known
    return known

def reads_as_string(value: str) -> bool:
    """True when ``value``, written plain, is read back by :func:`parse_yaml` as that string."""
    return not (value[:1] in _NUMBER_STARTS and _FLOAT_12.match(value))


class _Dumper(yaml.SafeDumper):
    """PyYAML's safe dumper, quoting every string that this module's YAML 1.2 reading would take for
    something else: PyYAML quotes by YAML 1.1's rules, which read ``1e5`` and ``573431241e710825`` as strings."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if reads_as_string(value):
        return dumper.represent_str(value)
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="'")


_Dumper.add_representer(str, _represent_str)


class _CDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """The same representer over libyaml's emitter (about four times faster), for the data both write alike."""


_CDumper.add_representer(str, _represent_str)


def safe_dump(data: Any, **options: Any) -> str:
    """``data`` as YAML that :func:`parse_yaml` reads back as ``data``: ``yaml.safe_dump`` with the strings a
    YAML 1.2 reader takes for numbers quoted (a lock's digest ``573431241e710825`` is a string, not 10^710825).
    libyaml emits it where it writes the Python emitter's bytes (``one_line_data``: a 1,000-model lock in
    0.04 s instead of 0.18), the Python emitter elsewhere (a scalar document, too: it ends with ``...``
    there), so the text never depends on which one ran."""
    fast = getattr(yaml, "__with_libyaml__", False) and isinstance(data, dict) and one_line_data(data)
    return yaml.dump(data, Dumper=_CDumper if fast else _Dumper, **options)


# PyYAML writes a key of 128 characters or more, or an empty one, as "? key"; libyaml only from 129 characters.
SIMPLE_KEY_LIMIT = 128


def one_line(text: str) -> bool:
    """Printable ASCII on one line: a string (a key, a value) both of PyYAML's emitters write the same."""
    return text.isascii() and text.isprintable()


def simple_key(key: Any) -> bool:
    """A mapping key both emitters write the same: a one-line string of 1 to 127 characters."""
    return type(key) is str and 0 < len(key) < SIMPLE_KEY_LIMIT and one_line(key)


def one_line_data(data: Any) -> bool:
    """Data both of PyYAML's emitters write byte for byte alike: mappings with ``simple_key`` keys, lists,
    ``one_line`` strings, integers, booleans and nulls. (They differ in how they fold long double-quoted
    escapes, which such strings never need, and in where a key becomes ``? key``; render/k8s/yaml_dump.py
    admits more, for the manifests.)"""
    kind = type(data)
    if kind is str:
        return one_line(data)
    if kind is dict:
        return all(simple_key(key) and one_line_data(value) for key, value in data.items())
    if kind is list:
        return all(one_line_data(item) for item in data)
    return data is None or kind in (bool, int)


def load_yaml(path: str) -> Document:
    """Read and parse a file; a missing or unreadable file is a SpecError, not a traceback."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([Issue(path, 0, 0, "", f"cannot read file: {exc}", "check the path")]) from None
    return parse_yaml(text, path)
