"""Scale: validate, plan, render (and the offline Pulumi preview) for 10 to 3,000 models.

Usage: python bench/scale.py [--sizes 10 100 1000 3000] [--preview-at 1000]
Wall time and peak Python memory (tracemalloc) per phase, time per model, and the ratio to simply
composing the YAML with PyYAML's C loader. Figures are from one run on a shared machine: read the ratios.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from synthetic import catalogue_text  # noqa: E402

from modelfleet.catalogue import parse_fleet_text  # noqa: E402
from modelfleet.compiler import compile_fleet  # noqa: E402
from modelfleet.environment import EnvironmentSpec  # noqa: E402
from modelfleet.instances import load_instance_catalogue  # noqa: E402
from modelfleet.render import render_fleet, write_tree  # noqa: E402

ENV = EnvironmentSpec(name="prod", region="us-east-1", instance_families=("g5", "g6", "g6e", "p4d", "p5", "p5en"))


def measure(fn):
    """(value, seconds, peak MiB): timed without tracing, then run again under tracemalloc for memory."""
    started = time.perf_counter()
    value = fn()
    seconds = time.perf_counter() - started
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return value, seconds, peak / 2**20


def preview_seconds(n: int) -> float:
    from modelfleet.preview_runner import run_program

    with tempfile.TemporaryDirectory() as tmp:
        for name in ("__main__.py", "Pulumi.yaml"):
            shutil.copy(ROOT / name, Path(tmp) / name)
        shutil.copytree(ROOT / "stacks", Path(tmp) / "stacks")
        (Path(tmp) / "models.yaml").write_text(catalogue_text(n))
        config = {"aws:region": "us-east-1", "modelfleet:instanceFamilies": list(ENV.instance_families)}
        started = time.perf_counter()
        result = run_program(tmp, "prod", config)
        assert result.error is None, result.error
        return time.perf_counter() - started


def row(n: int, catalogue, preview_at: int) -> str:
    text = catalogue_text(n)
    _, compose_s, _ = measure(lambda: yaml.compose(text, Loader=yaml.CSafeLoader))
    fleet, validate_s, validate_mb = measure(lambda: parse_fleet_text(text))
    plan, plan_s, plan_mb = measure(lambda: compile_fleet(fleet, ENV, catalogue))
    out = tempfile.mkdtemp()
    files, render_s, render_mb = measure(lambda: write_tree(render_fleet(plan), os.path.join(out, "r")) or None)
    shutil.rmtree(out)
    total = validate_s + plan_s + render_s
    preview = f"{preview_seconds(n):.1f}" if n == preview_at else "-"
    return (f"| {n:,} | {validate_s:.3f} | {plan_s:.3f} | {render_s:.3f} | {total:.3f} | {1000 * total / n:.2f} | "
            f"{total / compose_s:.0f}x | {max(validate_mb, plan_mb, render_mb):.0f} | {preview} |")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 3000])
    parser.add_argument("--preview-at", type=int, default=1000)
    args = parser.parse_args()
    catalogue = load_instance_catalogue()
    print("| models | validate s | plan s | render s | total s | ms/model | vs yaml.compose | peak MiB | preview s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        print(row(n, catalogue, args.preview_at), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
