"""A larger fuzz budget than CI's: how many inputs each source tried and what became of them.

Usage: python bench/fuzz.py [--scale 10] [--seed 0]
Runs the sources of tests/hardening/test_fuzz.py with ``--scale`` times CI's budget each. Every input goes
through what ``modelfleet render`` does for every real stack (validate, compile with guardrails, price,
render the artifacts and the Kubernetes manifests). Allowed outcomes: rendered, modelfleet's own SpecError
or CompileError with a line, or a crash with a listed known defect's signature (tests/hardening/
known_defects.py); anything else stops the run and prints the input.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402
from hypothesis import HealthCheck, Phase, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.hardening.fuzz_inputs import Outcomes, check_outcome, extreme_catalogues, mutated_catalogues, values  # noqa: E402
from tests.hardening.known_defects import known_defect  # noqa: E402

# The sources and CI's budget for each (tests/hardening/test_fuzz.py).
SOURCES = {
    "valid, edges of ranges": (extreme_catalogues(damage=()), 80),
    "valid + tags/out of range": (extreme_catalogues(), 80),
    "mutated example": (mutated_catalogues(), 200),
    "random documents": (values.map(lambda d: yaml.safe_dump({"models": d} if isinstance(d, list) else d,
                                                             allow_unicode=True)), 100),
    "arbitrary text": (st.text(max_size=300), 100),
}


class UnknownCrash(Exception):
    pass


def run_source(strategy: st.SearchStrategy[str], examples: int, seed_value: int) -> Outcomes:
    outcomes = Outcomes()

    @seed(seed_value)
    # No shrinking or explaining: an unknown crash is printed as found (shrinking re-renders thousands of times).
    @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck),
              phases=(Phase.generate,))
    @given(text=strategy)
    def run(text: str) -> None:
        try:
            outcomes[check_outcome(text)] += 1
        except Exception as error:  # noqa: BLE001 - classified below; an unknown one stops the run
            defect = known_defect(error)
            if defect is None:
                raise UnknownCrash(f"{traceback.format_exc()}\ninput:\n{text}") from error
            outcomes[f"known:{defect.id}"] += 1

    run()
    return outcomes


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--scale", type=float, default=10.0, help="times CI's budget per source")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    total = Outcomes()
    print("| source | inputs | rendered | compile-error | spec-error | known defects | s |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for name, (strategy, budget) in SOURCES.items():
        started = time.perf_counter()
        try:
            outcomes = run_source(strategy, max(1, round(budget * args.scale)), args.seed)
        except UnknownCrash as crash:
            print(f"CRASH in {name}:\n{crash}", file=sys.stderr)
            return 1
        total.update(outcomes)
        known = ", ".join(f"{k.removeprefix('known:')} {v}" for k, v in sorted(outcomes.items()) if k.startswith("known:"))
        print(f"| {name} | {sum(outcomes.values()):,} | {outcomes['rendered']:,} | {outcomes['compile-error']:,} | "
              f"{outcomes['spec-error']:,} | {known or '-'} | {time.perf_counter() - started:.0f} |", flush=True)
    print(f"\n{sum(total.values()):,} inputs: " + ", ".join(f"{k} {v:,}" for k, v in sorted(total.items()))
          + "; 0 unknown crashes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
