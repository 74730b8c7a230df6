"""Scale: exactly what `modelfleet validate`, `plan` and `render` do, and the offline preview, for 10 to
3,000 synthetic models.

Usage: python bench/scale.py [--sizes 10 100 1000 3000] [--preview-up-to 1000] [--profile 1000] [--distinct-traffic]

Each size gets a project of its own (synthetic models.yaml beside one stack, ``bench``: the prod stack's
settings without its budget and policies, which a synthetic fleet of 3,000 models would exceed). In process,
each command's work is timed as the command runs it:

- validate: parse and validate models.yaml, and every stack file;
- plan: validate, compile with the stack's guardrails (policies, budget), price, format the plan;
- render: validate, compile with guardrails, price, render every artifact and the Kubernetes manifests,
  write the tree atomically (render alone: ``render_kubernetes``, shown separately).

Wall time is the best of ``--repeat`` runs, each started cold: memos a previous run left in the process
(binpacking's solved packings, ``functools`` caches, the simulations' memo) are cleared first, as a command
starts without them; the LLMs' simulations run in one forked worker per CPU, as the CLI runs them
(plan/prewarm.py). A second table times the sequence a user runs with the simulations' disk cache
(simcache.py): plan with the cache emptied first, then render reading what plan stored.
Peak memory is Python's (tracemalloc, one more run). The CLI
columns run the real ``modelfleet`` commands once each, in order, sharing a fresh cache (interpreter start
and imports included; peak RSS from the child's rusage); preview is ``modelfleet preview --stack bench`` (the Pulumi program under mocks).
``--profile N`` prints cProfile's top functions of render_kubernetes, render and the preview at N models.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import replace
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from synthetic import catalogue_text  # noqa: E402

from modelfleet.commands import cpus  # noqa: E402
from modelfleet.commands.plan import format_plan  # noqa: E402
from modelfleet.project import Project  # noqa: E402
from modelfleet.render.fleet import write_tree  # noqa: E402
from modelfleet.render.manifests import render_kubernetes  # noqa: E402

STACK = "bench"
MODELFLEET = str(Path(sys.executable).parent / "modelfleet")


def bench_project(n: int, parent: Path, cache: Path | None = None, distinct_traffic: bool = False) -> Project:
    """A project of ``n`` synthetic models and the ``bench`` stack, as the Pulumi program expects it
    (``distinct_traffic``: no two LLMs of one traffic, synthetic.llm)."""
    root = parent / f"fleet-{n}"
    (root / "stacks").mkdir(parents=True)
    config = yaml.safe_load((ROOT / "stacks" / "Pulumi.prod.yaml").read_text())["config"]
    config = {k: v for k, v in config.items() if k not in ("modelfleet:budget", "modelfleet:policies")}
    (root / "stacks" / f"Pulumi.{STACK}.yaml").write_text(yaml.safe_dump({"config": config}, sort_keys=False))
    for name in ("__main__.py", "Pulumi.yaml"):
        shutil.copy(ROOT / name, root / name)
    (root / "models.yaml").write_text(catalogue_text(n, distinct_traffic=distinct_traffic))
    # as the CLI's commands (commands.project_from): the CPUs, and the disk cache when ``cache`` is given
    return Project(root=str(root), workers=cpus(), cache_dir=None if cache is None else str(cache))


def validate(project: Project) -> None:
    """modelfleet validate"""
    project.fleet()
    for stack in project.stacks():
        project.environment(stack)


def plan(project: Project) -> str:
    """modelfleet plan --stack bench"""
    return format_plan(project.plan_and_cost(STACK)[0])


def render(project: Project, out: Path) -> None:
    """modelfleet render --stack bench --out OUT"""
    write_tree(project.rendered(STACK)[1], str(out))


def forget_memos() -> None:
    """Clear every functools cache in modelfleet, so the next run does what a fresh command does."""
    for name, module in list(sys.modules.items()):
        if name == "modelfleet" or name.startswith("modelfleet."):
            for value in vars(module).values():
                if not isinstance(value, type) and callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def measure(fn: Callable[[], Any], repeat: int) -> tuple[float, float]:
    """(best wall seconds of ``repeat`` cold runs, peak MiB of Python allocations in one more traced run)."""
    best = float("inf")
    for _ in range(repeat):
        forget_memos()
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    forget_memos()
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return best, peak / 2**20


def cli(project: Project, *args: str, environ: dict[str, str] | None = None) -> tuple[float, float]:
    """(wall seconds, peak RSS MiB) of one real ``modelfleet`` command (``environ``: added variables)."""
    environ = {**os.environ, **(environ or {}), "PYTHONPATH": str(ROOT)}  # this checkout's modelfleet
    # stderr to a file, not a pipe: a command's warnings (two per LLM without p99_tpot_ms or avg_input_tokens)
    # fill a 64 KiB pipe nobody reads during wait4, and the command then blocks forever.
    with tempfile.TemporaryFile() as errors:
        started = time.perf_counter()
        process = subprocess.Popen([MODELFLEET, "--project", project.root, *args], env=environ,
                                   stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        seconds = time.perf_counter() - started
        if os.waitstatus_to_exitcode(status) != 0:
            errors.seek(0)
            raise RuntimeError(f"modelfleet {' '.join(args)} failed: {errors.read().decode()[-2000:]}")
    return seconds, usage.ru_maxrss / 1024


def row(n: int, work: Path, repeat: int, preview: bool, distinct_traffic: bool = False) -> dict[str, float]:
    project = bench_project(n, work, distinct_traffic=distinct_traffic)
    text = Path(project.models_path).read_text()
    figures: dict[str, float] = {}
    figures["compose"], _ = measure(lambda: yaml.compose(text, Loader=yaml.CSafeLoader), repeat)
    figures["validate"], figures["validate_mib"] = measure(lambda: validate(project), repeat)
    figures["plan"], figures["plan_mib"] = measure(lambda: plan(project), repeat)
    out = work / f"out-{n}"
    figures["render"], figures["render_mib"] = measure(lambda: render(project, out), repeat)
    planned = project.plan(STACK)
    deploy = project.environment(STACK).deploy
    figures["k8s"], _ = measure(lambda: render_kubernetes(planned, deploy), repeat)
    # A session's sequence with the simulations' disk cache (modelfleet/simcache.py), as a user runs it: plan
    # cold (the cache emptied before each run), then render reading what plan stored (the memos cleared).
    cache = work / f"cache-{n}"
    cached = replace(project, cache_dir=str(cache))

    def plan_cold() -> None:
        shutil.rmtree(cache, ignore_errors=True)
        plan(cached)
    figures["plan_cold"], _ = measure(plan_cold, repeat)
    figures["render_warm"], _ = measure(lambda: render(cached, out), repeat)
    figures.update({f"stage_{k}": v for k, v in stages(cached, out).items()})
    environ = {"MODELFLEET_CACHE_DIR": str(work / f"cli-cache-{n}")}  # fresh: plan cold, render and preview warm
    for command in ("validate", "plan", "render"):
        extra = ("--stack", STACK) if command != "validate" else ()
        extra += ("--out", str(work / f"cli-{n}")) if command == "render" else ()
        figures[f"cli_{command}"], figures[f"cli_{command}_mib"] = cli(project, command, *extra, environ=environ)
    if preview:
        figures["preview"], figures["preview_mib"] = cli(project, "preview", "--stack", STACK, environ=environ)
    return figures


STAGES = (  # (module, function) of the render command's stages, each timed where project.rendered calls it
    ("modelfleet.project", "prewarm_simulations"), ("modelfleet.project", "compile_with_guardrails"),
    ("modelfleet.project", "render_triton_repositories"), ("modelfleet.project", "render_kubernetes"),
    ("modelfleet.project", "render_fleet"), (__name__, "write_tree"))


def stages(project: Project, out: Path) -> dict[str, float]:
    """Where a render's time goes, with the simulations' disk cache warm (as after a ``plan``): seconds per
    stage of one run, each function timed where ``Project.rendered`` (and ``render``) calls it."""
    spent: dict[str, float] = {name: 0.0 for _, name in STAGES}
    saved = []
    for module_name, name in STAGES:
        module = sys.modules[module_name]
        original = getattr(module, name)
        saved.append((module, name, original))

        def timed(*args: Any, _fn: Callable[..., Any] = original, _name: str = name, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return _fn(*args, **kwargs)
            finally:
                spent[_name] += time.perf_counter() - started
        setattr(module, name, timed)
    try:
        forget_memos()
        started = time.perf_counter()
        render(project, out)
        spent["total"] = time.perf_counter() - started
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
    return spent


def print_stages(rows: dict[int, dict[str, float]]) -> None:
    print("\nWhere a render's time goes, the simulations' disk cache warm (one run, in process; render_fleet less "
          "render_kubernetes is plan.json, the vLLM settings and the Triton files' assembly; the rest is parsing "
          "models.yaml and the stack, pricing and the lock):\n")
    print("| models | render s | prewarm s | compile+guardrails s | Triton repositories s | render_kubernetes s | "
          "other render_fleet s | write s | rest s |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, f in rows.items():
        t = {k[len("stage_"):]: v for k, v in f.items() if k.startswith("stage_")}
        other = t["render_fleet"] - t["render_kubernetes"]
        rest = t["total"] - t["prewarm_simulations"] - t["compile_with_guardrails"] - t["render_triton_repositories"] \
            - t["render_fleet"] - t["write_tree"]
        print(f"| {n:,} | {t['total']:.2f} | {t['prewarm_simulations']:.2f} | {t['compile_with_guardrails']:.2f} | "
              f"{t['render_triton_repositories']:.2f} | {t['render_kubernetes']:.2f} | {other:.2f} | "
              f"{t['write_tree']:.2f} | {rest:.2f} |")


def print_tables(rows: dict[int, dict[str, float]]) -> None:
    print("In process (best of runs; peak = Python allocations):\n")
    print("| models | validate s | plan s | render s | (of which render_kubernetes s) | validate+plan+render s | "
          "ms/model | vs yaml.compose | peak MiB (render) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, f in rows.items():
        total = f["validate"] + f["plan"] + f["render"]
        print(f"| {n:,} | {f['validate']:.3f} | {f['plan']:.3f} | {f['render']:.3f} | {f['k8s']:.3f} | {total:.2f} | "
              f"{1000 * total / n:.2f} | {total / f['compose']:.0f}x | {f['render_mib']:.1f} |")
    print("\nWith the simulations' disk cache (in process, best of runs): plan with the cache emptied first, then "
          "render reading what plan stored:\n")
    print("| models | validate s | plan (cold cache) s | render (warm cache) s | validate+plan+render s | "
          "vs yaml.compose |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n, f in rows.items():
        total = f["validate"] + f["plan_cold"] + f["render_warm"]
        print(f"| {n:,} | {f['validate']:.3f} | {f['plan_cold']:.3f} | {f['render_warm']:.3f} | {total:.2f} | "
              f"{total / f['compose']:.0f}x |")
    print("\nReal commands (one run each, in this order, sharing a fresh simulation cache: plan fills it, render and "
          "preview read it; interpreter start and imports included; peak RSS):\n")
    print("| models | validate s | plan s | render s | render peak RSS MiB | preview s | preview ms/model | "
          "preview peak RSS MiB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for n, f in rows.items():
        preview = (f"{f['preview']:.1f} | {1000 * f['preview'] / n:.0f} | {f['preview_mib']:.0f}"
                   if "preview" in f else "- | - | -")
        print(f"| {n:,} | {f['cli_validate']:.2f} | {f['cli_plan']:.2f} | {f['cli_render']:.2f} | "
              f"{f['cli_render_mib']:.0f} | {preview} |")
    print_stages(rows)


def profile(n: int, work: Path, top: int = 25) -> None:
    """cProfile of render_kubernetes, of the whole render command and of the preview (run_program) at ``n``
    models: the functions with the most own time, and with the most time under them."""
    from modelfleet.preview.runner import run_program

    project = bench_project(n, work / "profile")
    planned, deploy = project.plan(STACK), project.environment(STACK).deploy
    config = yaml.safe_load(Path(project.environment_path(STACK)).read_text())["config"]
    targets = (("render_kubernetes", lambda: render_kubernetes(planned, deploy)),
               ("the render command", lambda: render(project, work / "profile-out")),
               ("preview (run_program)", lambda: run_program(project.root, STACK, config, {"modelfleet:hfToken": "hf_x"})))
    for title, fn in targets:
        forget_memos()
        profiler = cProfile.Profile()
        started = time.perf_counter()
        profiler.runcall(fn)
        print(f"\n## {title} at {n:,} models: {time.perf_counter() - started:.1f} s under cProfile\n")
        for sort in ("tottime", "cumulative"):
            stream = io.StringIO()
            pstats.Stats(profiler, stream=stream).sort_stats(sort).print_stats(top)
            print(f"### by {sort}\n```\n{_trim(stream.getvalue())}\n```")


def _trim(report: str) -> str:
    lines = report.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("ncalls"))
    return "\n".join(line.replace(str(ROOT) + "/", "").replace(sys.prefix + "/", "") for line in lines[start:])


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 1000, 3000])
    parser.add_argument("--preview-up-to", type=int, default=1000, help="largest size to run the preview at")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", type=int, default=0, help="profile render_kubernetes and preview at N models")
    parser.add_argument("--distinct-traffic", action="store_true",
                        help="every LLM a traffic of its own, so none shares a simulation (the default fleet's 200 "
                             "LLMs are 36 specs: see bench/synthetic.py)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="modelfleet-scale-") as tmp:
        if args.profile:
            profile(args.profile, Path(tmp))
            return 0
        rows = {}
        for n in args.sizes:
            rows[n] = row(n, Path(tmp), args.repeat, preview=n <= args.preview_up_to,
                          distinct_traffic=args.distinct_traffic)
            print(f"{n:,} models done", file=sys.stderr, flush=True)
        print_tables(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
