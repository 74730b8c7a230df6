"""Every comparison the plan and cost outputs print holds: ``1,224 ms <= 1,500 ms`` only when it is so.

Every plan (text and JSON) and cost report (text, markdown, JSON) of the example projects is scanned for a
number, an optional unit, a comparison (``<=``, ``<``, ``>=``, ``>``, ``≤``, ``≥``) and a number, and each such
statement is checked numerically. A miss must be said in words ("misses"), never printed as a false inequality.
"""

from __future__ import annotations

import operator
import re

import pytest

from modelfleet.cli import main
from tests.conftest import ROOT

PROJECTS = {"fleet": ROOT, "deepseek-v3": ROOT / "examples" / "deepseek-v3"}
NUMBER = r"(-?\d[\d,]*(?:\.\d+)?)"
COMPARISON = re.compile(NUMBER + r"\s*(?:[A-Za-z%/]+)?\)?\s*(<=|>=|≤|≥|<|>)\s*(?:p\d+\s+)?" + NUMBER)
HOLDS = {"<=": operator.le, "≤": operator.le, ">=": operator.ge, "≥": operator.ge, "<": operator.lt, ">": operator.gt}


def false_comparisons(text: str) -> list[str]:
    wrong = []
    for match in COMPARISON.finditer(text):
        left, op, right = float(match[1].replace(",", "")), match[2], float(match[3].replace(",", ""))
        if not HOLDS[op](left, right):
            wrong.append(text[max(0, match.start() - 80):match.end() + 20])
    return wrong


def test_the_scanner_finds_a_false_comparison_and_passes_true_ones():
    assert false_comparisons("p99 TTFT 38,437 ms <= 10,000 ms") != []
    assert false_comparisons("TPOT 42.5 ms <= p99 50 ms; 1,224 ms (95% bound 1,400) <= 1,500 ms; 3 > 2") == []
    assert false_comparisons("p99 TTFT 1,700 ms (95% bound 1,900), which misses 1,500 ms") == []


def outputs(project, capsys) -> dict[str, str]:
    stacks = sorted(p.name.split(".")[1] for p in (project / "stacks").glob("Pulumi.*.yaml"))
    found = {}
    for args in ([["plan", "--stack", s] for s in stacks] + [["plan", "--stack", s, "--json"] for s in stacks]
                 + [["cost", "--format", f] for f in ("text", "markdown", "json")]):
        main(["--project", str(project), *args])
        found[" ".join(args)] = capsys.readouterr().out
    return found


@pytest.mark.parametrize("name", sorted(PROJECTS))
def test_no_plan_or_cost_output_prints_a_false_comparison(name, capsys):
    found = outputs(PROJECTS[name], capsys)
    assert all(found.values())
    assert {command: wrong for command, text in found.items() if (wrong := false_comparisons(text))} == {}
