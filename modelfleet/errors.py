"""The one error family of modelfleet.

    ModelfleetError                 anything the CLI reports as a user error (exit code 2)
    ├── SpecError                   bad input: the file does not say something valid
    │                               (``models.yaml:12:7: models[3].sla.p99_latency_ms: message (fix)``)
    ├── CompileError                valid input that cannot be satisfied
    │                               (``models[5] llama-405b: needs 754 GiB ... (allow p5 or use fp8)``)
    ├── OutputError                 the output cannot go where asked: refused (``render --out`` at a
    │                               directory it did not write) or the filesystem said no
    │                               (``out/: cannot write it: No space left on device (free some ...)``)
    └── MissingExtra                an optional part needs a package that is not installed
                                    (``rendering dashboards needs grafana-foundation-sdk ... (pip install ...)``)

Both carry *every* problem found, as a tuple of :class:`Issue`, and are raised once. Anything else that
escapes is a bug and keeps its traceback.
"""

from __future__ import annotations

from dataclasses import dataclass

EXIT_USER_ERROR = 2  # the exit code of every ModelfleetError (cli.py), and of commands that fail the same way


@dataclass(frozen=True, order=True)
class Issue:
    """One problem, located as precisely as the input allows.

    ``line`` and ``column`` are 1-based; 0 means "no position" (e.g. a compile problem about a whole model).
    ``path`` is the dotted/bracketed path inside the document, e.g. ``models[3].sla.p99_latency_ms``.
    """

    file: str
    line: int
    column: int
    path: str
    message: str
    fix: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        parts = [p for p in (where, self.path) if p]
        text = ": ".join(parts + [self.message])
        return f"{text} ({self.fix})" if self.fix else text


class ModelfleetError(Exception):
    """Base of every error modelfleet raises on purpose."""

    def __init__(self, issues: tuple[Issue, ...] | list[Issue]) -> None:
        self.issues: tuple[Issue, ...] = tuple(sorted(issues))
        super().__init__("\n".join(str(i) for i in self.issues))


class SpecError(ModelfleetError):
    """The input is not a valid catalogue or stack file (types, units, unknown keys, contradictions)."""


class CompileError(ModelfleetError):
    """The input is valid but no plan satisfies it (nothing fits, SLA too tight, policy forbids)."""


class OutputError(ModelfleetError):
    """The output cannot be written where asked: the target holds something of the user's, or the
    filesystem refused (permissions, no space, no such directory). Nothing was written."""


class MissingExtra(ModelfleetError):
    """An optional part of modelfleet needs a package of an extra that is not installed; the fix names it."""
