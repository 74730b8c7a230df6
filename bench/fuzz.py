"""A larger fuzz budget than CI's: how many inputs were tried and what became of them.

Usage: python bench/fuzz.py [--examples 5000]
Every input must end as a plan or as modelfleet's own SpecError (with a line) / CompileError (with a
model path); anything else fails the run with the input that caused it.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from modelfleet.instances import load_instance_catalogue  # noqa: E402
from tests.hardening.fuzz_inputs import check_outcome, mutated_catalogues  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--examples", type=int, default=5000)
    args = parser.parse_args()
    catalogue = load_instance_catalogue()
    outcomes: collections.Counter[str] = collections.Counter()

    @settings(max_examples=args.examples, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    @given(text=st.one_of(mutated_catalogues(), st.text(max_size=400)))
    def run(text: str) -> None:
        outcomes[check_outcome(text, catalogue)] += 1

    started = time.perf_counter()
    run()
    seconds = time.perf_counter() - started
    total = sum(outcomes.values())
    print(f"{total} inputs in {seconds:.0f} s: " + ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()))
          + "; 0 crashes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
