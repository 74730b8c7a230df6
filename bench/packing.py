"""Packing quality on fleets of small classic models: the compiled monthly cost against a lower bound and
against one GPU per model (what most serving platforms do by default).

Usage: python bench/packing.py [--sizes 10 30 100 300]

- compiled: the Triton node group the compiler plans (desired nodes x USD/h x 730).
- lower bound: for each GPU type, price per GPU x max(sum of replicas x memory / usable GPU memory,
  sum of compute demand), never below the zone spread; the cheapest GPU type.
- one GPU per model: each model alone on the cheapest single-GPU instance that holds it, with the same
  replica count the compiler gives it (availability floor or load).

Every figure uses the environment's own settings (targetUtilization, availability thresholds), never
constants of its own.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from synthetic import catalogue_text  # noqa: E402

from modelfleet.plan.compiler import compile_fleet  # noqa: E402
from modelfleet.plan.hardware.instances import load_instance_catalogue  # noqa: E402
from modelfleet.plan.sizing import TRITON_GPU_OVERHEAD_GIB, availability_floor  # noqa: E402
from modelfleet.plan.triton.policy import size_classic  # noqa: E402
from modelfleet.spec.environment import EnvironmentSpec  # noqa: E402
from modelfleet.spec.load import parse_fleet_text  # noqa: E402

HOURS = 730
ENV = EnvironmentSpec(name="prod", region="us-east-1")


def per_gpu_price(instance) -> float:
    return instance.price("us-east-1") / instance.gpus


def lower_bound(models, catalogue) -> float:
    best = math.inf
    for instance in catalogue.in_families(ENV.instance_families):
        capacity = instance.gpu_memory_gib - TRITON_GPU_OVERHEAD_GIB
        sizings = [size_classic(m, instance.gpu, catalogue, ENV.triton.target_utilization) for m in models]
        floors = [floor(m) for m in models]
        memory = sum(f * s.gpu_memory_gib for f, s in zip(floors, sizings)) / capacity
        compute = sum(s.gpu_demand for s in sizings)
        gpus = max(memory, compute, max(floors))
        best = min(best, gpus * per_gpu_price(instance))
    return best * HOURS


def floor(model) -> int:
    return availability_floor(model.sla.availability, ENV.replicas.ha_availability, ENV.replicas.ha3_availability)


def one_gpu_per_model(models, plan, catalogue) -> float:
    singles = [i for i in catalogue.in_families(ENV.instance_families) if i.gpus == 1]
    utilization = ENV.triton.target_utilization
    total = 0.0
    for model in models:
        fits = [i for i in singles if size_classic(model, i.gpu, catalogue, utilization).gpu_memory_gib
                <= i.gpu_memory_gib - TRITON_GPU_OVERHEAD_GIB]
        cheapest = min(fits, key=lambda i: i.price("us-east-1"))
        sizing = size_classic(model, cheapest.gpu, catalogue, utilization)
        replicas = max(floor(model), math.ceil(sizing.gpu_demand))
        total += replicas * cheapest.price("us-east-1")
    return total * HOURS


def compiled(plan, catalogue) -> float:
    groups = {s.node_group for s in plan.triton_servers}
    return sum(g.desired_size * catalogue.instances[g.instance_type].price("us-east-1")
               for g in plan.node_groups if g.name in groups) * HOURS


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 30, 100, 300])
    args = parser.parse_args()
    catalogue = load_instance_catalogue()
    print("| models | compiled USD/month | lower bound | compiled / bound | one GPU per model | one-per-model / compiled |")
    print("|---:|---:|---:|---:|---:|---:|")
    for n in args.sizes:
        fleet = parse_fleet_text(catalogue_text(n, llm_share=0.0, seed=n, small=True))
        plan = compile_fleet(fleet, ENV, catalogue)
        cost, bound = compiled(plan, catalogue), lower_bound(fleet.models, catalogue)
        naive = one_gpu_per_model(fleet.models, plan, catalogue)
        print(f"| {n} | {cost:,.0f} | {bound:,.0f} | {cost / bound:.2f} | {naive:,.0f} | {naive / cost:.1f}x |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
