"""Issue 22's check of the plans themselves: every LLM a stack plans is re-simulated here by an independent,
naive implementation of vLLM's V1 scheduler (one step at a time, every replica of the model at once, the whole
stream routed at random as a Service routes it; no runs of decode steps, no thinning, no memo), driven by the
performance model's own ``step_ms`` at the plan's layout, ``max_num_seqs``, ``max_num_batched_tokens`` and KV
cache, with another seed. Its p99 TTFT must agree with the plan's within 25%, and neither may be above the SLA.

Slow (a few seconds per model: every token is a step): the full tier runs it, on prod and on fleets of
models and traffic the example does not have.
"""

from __future__ import annotations

import math
import random
from collections import deque

import pytest

from modelfleet.plan.compiler import compile_fleet, models_in
from modelfleet.plan.llm.search import demand_of, size_layout
from modelfleet.plan.llm.speed.calibration import gpu_for
from modelfleet.plan.llm.speed.peak import traffic_of
from modelfleet.plan.llm.speed.performance import Layout, Step, step_ms
from modelfleet.plan.llm.speed.simulation import percentile
from modelfleet.spec.load import with_fields
from modelfleet.spec.models import FleetSpec, LlmModelSpec
from modelfleet.spec.presets import LLM_PRESETS

pytestmark = pytest.mark.slow

TOLERANCE = 0.25
MEASURED = 1500  # as many as the plan simulates, after a tenth as many warm-up requests
SEED = 987_654_321  # not the plan's (peak.seed_of the traffic)


def naive_p99_ttft(model: LlmModelSpec, planned, env, catalogue) -> float:
    """The p99 TTFT of ``planned`` (a VllmModelPlan) under the model's declared traffic, simulated naively."""
    instance = catalogue.instances[planned.instance_type]
    demand = demand_of(model, env)
    sized = size_layout(model, env, catalogue, instance, planned.tensor_parallel_size, planned.pipeline_parallel_size,
                        planned.expert_parallel, demand)
    gpu, layout = gpu_for(instance.gpu), Layout(planned.tensor_parallel_size, planned.pipeline_parallel_size,
                                                planned.expert_parallel)
    dispatch = gpu.prefill_dispatch_ms_per_layer * sized.shape.layers

    def step(prompt: int, context: float, decodes: int, decode_context: float) -> float:
        ms = step_ms(gpu, sized.shape, layout, Step(prompt, context, decodes, decode_context))
        return ms + dispatch if prompt else ms
    traffic = traffic_of(model.sla)
    rng = random.Random(SEED)
    lengths_in, lengths_out = traffic.input.sampler(rng), traffic.output.sampler(rng)
    trace = list(traffic.trace)

    def lengths(i: int) -> tuple[int, int]:
        if trace:
            return trace[i % len(trace)]
        out = min(lengths_out(), traffic.max_context_tokens - 1)
        return max(1, min(lengths_in(), traffic.max_context_tokens - out)), out
    replicas = [_Engine(step, planned.max_num_seqs, planned.max_num_batched_tokens, sized.kv_tokens // 16)
                for _ in range(planned.replicas)]
    warmup = MEASURED // 10
    total = warmup + MEASURED
    arrivals: list[tuple[float, int, int]] = []  # (time, order, user)
    issued = 0
    if traffic.arrivals == "closed":
        warmup = max(warmup, 2 * traffic.users)
        total = warmup + MEASURED
        for user in range(traffic.users):
            arrivals.append((0.0, issued, user))
            issued += 1
    else:
        clock = 0.0
        gaps = list(traffic.trace_gaps_s)
        scale = len(gaps) / (sum(gaps) * traffic.rate_per_s) if gaps else 0.0
        shape = 1.0 / (traffic.cv ** 2) if traffic.arrivals == "bursty" else 1.0
        for i in range(total + 4 * MEASURED):  # the stream goes on until the measured ones finish
            if gaps:
                clock += gaps[i % len(gaps)] * scale * 1000.0
            else:
                clock += rng.gammavariate(shape, 1000.0 / traffic.rate_per_s / shape)
            arrivals.append((clock, i, -1))
        issued = len(arrivals)
    arrivals.sort()
    pending = deque(arrivals)
    ttfts: dict[int, float] = {}
    think_ms = traffic.think_time_s * 1000.0
    while sum(1 for k in ttfts if warmup <= k < total) < MEASURED:
        busy = [e for e in replicas if e.running or e.waiting]
        next_step = min(busy, key=lambda e: e.clock) if busy else None
        if pending and (next_step is None or pending[0][0] <= next_step.clock):
            time, order, user = pending.popleft()
            engine = replicas[rng.randrange(len(replicas))]
            prompt, output = lengths(order)
            if not engine.running and not engine.waiting:
                engine.clock = max(engine.clock, time)
            engine.waiting.append(dict(order=order, user=user, arrival=time, prompt=prompt, output=output,
                                       computed=0, generated=0, blocks=0, first=None))
            continue
        for r in next_step.step():
            if r["user"] >= 0 and issued < total + 4 * MEASURED:
                _insert(pending, (r["finish"] + think_ms, issued, r["user"]))
                issued += 1
            if warmup <= r["order"] < total:
                ttfts[r["order"]] = r["first"] - r["arrival"]
    return percentile(sorted(ttfts.values()), 99)


def _insert(pending: deque, event: tuple[float, int, int]) -> None:
    items = list(pending)
    items.append(event)
    items.sort()
    pending.clear()
    pending.extend(items)


class _Engine:
    """vLLM V1's schedule() written out plainly: running first (preempting the last when the KV cache is
    full), then waiting ones while the budget, max_num_seqs and the cache allow; one step per call."""

    def __init__(self, step, max_num_seqs: int, budget: int, kv_blocks: int, block_size: int = 16) -> None:
        self.step_time, self.seqs, self.budget, self.free, self.bs = step, max_num_seqs, budget, kv_blocks, block_size
        self.running: list[dict] = []
        self.waiting: deque[dict] = deque()
        self.clock = 0.0

    def step(self) -> list[dict]:
        left, plan, preempted = self.budget, [], False
        for r in list(self.running):
            if r not in self.running or left == 0:
                break
            new = min(r["prompt"] + r["generated"] - r["computed"], left)
            need = math.ceil((r["computed"] + new) / self.bs) - r["blocks"]
            while need > self.free and r in self.running:
                victim = self.running.pop()
                self.free += victim["blocks"]
                victim.update(blocks=0, computed=0)
                self.waiting.appendleft(victim)
                preempted = True
            if r not in self.running:
                break
            r["blocks"] += need
            self.free -= need
            plan.append((r, new))
            left -= new
        while not preempted and self.waiting and left > 0 and len(self.running) < self.seqs:
            r = self.waiting[0]
            new = min(r["prompt"] + r["generated"], left)
            need = math.ceil(new / self.bs)
            if need > self.free:
                break
            self.waiting.popleft()
            self.running.append(r)
            r["blocks"] = need
            self.free -= need
            plan.append((r, new))
            left -= new
        if not plan:
            return []
        decodes = [r for r, new in plan if new == 1 and r["generated"]]
        prompts = [(r, new) for r, new in plan if not (new == 1 and r["generated"])]
        tokens = sum(new for _, new in prompts)
        work = sum(new * (r["computed"] + new / 2) for r, new in prompts)
        context = tokens + max(0.0, work / tokens - tokens / 2) if tokens else 0.0
        mean = sum(r["computed"] + 1 for r in decodes) / len(decodes) if decodes else 0.0
        self.clock += self.step_time(tokens, context, len(decodes), mean)
        done = []
        for r, new in plan:
            r["computed"] += new
            if r["computed"] == r["prompt"] + r["generated"]:
                r["generated"] += 1
                r["first"] = self.clock if r["first"] is None else r["first"]
                if r["generated"] >= r["output"]:
                    self.running.remove(r)
                    self.free += r["blocks"]
                    r["finish"] = self.clock
                    done.append(r)
        return done


def _check(fleet: FleetSpec, env, catalogue) -> list[str]:
    plan = compile_fleet(fleet, env, catalogue)
    checked = []
    for _, model in models_in(fleet, env.name):
        if not isinstance(model, LlmModelSpec):
            continue
        planned = plan.model(model.name)
        e = planned.estimates
        naive = naive_p99_ttft(model, planned, env, catalogue)
        sla = model.sla.p99_ttft_ms
        assert naive == pytest.approx(e.ttft_p99_ms, rel=TOLERANCE), (model.name, naive, e.ttft_p99_ms)
        assert e.ttft_p99_ms <= sla and naive <= sla, (model.name, naive, e.ttft_p99_ms, sla)
        checked.append(f"{model.name}: plan {e.ttft_p99_ms:,.0f} ms, naive {naive:,.0f} ms, SLA {sla:,.0f}")
    return checked


def test_every_prod_llm_holds_under_an_independent_simulation(project, catalogue):
    fleet, env = project.fleet(), project.environment("prod")
    checked = _check(fleet, env, catalogue)
    print("\n".join(checked))  # the figures, with -s
    assert len(checked) == 3, checked


TRAFFIC = [
    {"arrivals": "poisson", "input": {"distribution": "exponential"}, "output": {"distribution": "exponential"}},
    {"arrivals": "bursty", "cv": 3, "input": {"distribution": "lognormal", "cv": 0.8},
     "output": {"distribution": "lognormal", "p99": 1200}},
    {"arrivals": "closed", "think_time_s": 5, "output": {"distribution": "exponential"}},
]


@pytest.mark.parametrize("preset, traffic, load", [
    ("qwen2.5-7b", TRAFFIC[0], {"peak_requests_per_s": 6}),
    ("mistral-7b", TRAFFIC[1], {"peak_requests_per_s": 2}),
    ("llama-3.1-8b", TRAFFIC[2], {"peak_concurrent_sequences": 40}),
])
def test_fleets_not_in_the_example_hold_too(project, catalogue, preset, traffic, load):
    model = LlmModelSpec.model_validate({
        "name": "m", "type": "llm", "artifact": LLM_PRESETS[preset].repo, "size": {"dtype": "bf16"},
        "revision": "0123456789abcdef0123456789abcdef01234567",
        "architecture": preset, "sla": {"max_context_tokens": 8192, "avg_input_tokens": 1200, "avg_output_tokens": 250,
                                        "p99_ttft_ms": 1500, "p99_tpot_ms": 60, "traffic": traffic, **load}})
    env = project.environment("prod")
    checked = _check(FleetSpec(models=(model,)), env, catalogue)
    print("\n".join(checked))
    assert checked
