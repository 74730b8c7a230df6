"""One vLLM engine as its V1 scheduler runs it, step by step (vllm/v1/core/sched/scheduler.py, ``schedule``).

Each step has a budget of ``max_num_batched_tokens`` tokens:

1. running requests first, in the order they were admitted: each gets the tokens it still needs (one for a
   decoding sequence, the rest of its prompt for a partial prefill), cut to the budget left; its KV blocks
   are allocated for them, and when the cache is full the last running request is preempted (its blocks
   freed, its progress dropped: it is recomputed, prompt and answer so far, when it runs again), repeatedly,
   until the allocation fits or the request itself was the one preempted;
2. then, if nothing was preempted this step, waiting requests first come first served, while the budget
   lasts, fewer than ``max_num_seqs`` run and their first chunk's blocks fit.

A request whose computed tokens reach its known tokens samples one: its first is the time to first token,
each later one a gap between tokens. A step lasts ``step_time(prompt tokens, their context, decoding
sequences, their mean context)``; several partial prefills in one step are one prefill of their summed tokens,
with the context that keeps their attention work.

Speed: a run of identical decode-only steps (every running request decoding, nothing waiting that could be
admitted) is taken at once, up to the next completion, the next arrival that could be admitted (``horizon``)
or the step at which the KV cache would run out; its step time is taken at the run's mean context (step time
is linear in it). So a simulation costs a few events per request, not a Python loop per token.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Callable

StepTimeFn = Callable[[int, float, int, float], float]


class Request:
    __slots__ = ("arrival", "prompt", "output", "computed", "generated", "blocks", "first", "last", "finish",
                 "user", "measured")

    def __init__(self, arrival: float, prompt: int, output: int, user: int, measured: bool) -> None:
        self.arrival, self.prompt, self.output, self.user, self.measured = arrival, prompt, output, user, measured
        self.computed = self.generated = self.blocks = 0
        self.first = self.last = self.finish = -1.0


class Replica:
    """The scheduler's state: running and waiting requests, free KV blocks, the clock (ms)."""

    def __init__(self, *, step_time: StepTimeFn, max_num_seqs: int, max_num_batched_tokens: int, kv_blocks: int,
                 block_size: int) -> None:
        self.step_time, self.max_num_seqs, self.budget = step_time, max_num_seqs, max_num_batched_tokens
        self.free, self.block_size = kv_blocks, block_size
        self.running: list[Request] = []
        self.waiting: deque[Request] = deque()
        self.now = 0.0
        self.preemptions = 0
        self.gaps: dict[float, int] = {}  # inter-token gap (ms) -> how many measured tokens had it

    def idle(self) -> bool:
        return not self.running and not self.waiting

    def step(self, horizon: float) -> list[Request]:
        """Run the next step (or run of identical decode steps, ending before ``horizon`` when an arrival
        then could be admitted) from ``now``; returns the requests that finished."""
        scheduled, preempted = self._schedule()
        if not scheduled:  # the only running request preempted itself: the next schedule admits it
            scheduled, preempted = self._schedule()
            if not scheduled:
                head = self.waiting[0]
                raise ValueError(f"a request of {head.prompt + head.output} tokens does not fit the KV cache "
                                 f"({self.free} blocks of {self.block_size} free)")
        if not preempted and len(scheduled) == len(self.running) and all(
                new == 1 and r.generated for r, new in scheduled):
            return self._decode_run(horizon)
        return self._one_step(scheduled)

    def _schedule(self) -> tuple[list[tuple[Request, int]], bool]:
        budget, bs, running = self.budget, self.block_size, self.running
        scheduled: list[tuple[Request, int]] = []
        preempted, i = False, 0
        while i < len(running) and budget > 0:
            r = running[i]
            new = min(r.prompt + r.generated - r.computed, budget)
            need = -(-(r.computed + new) // bs) - r.blocks
            while need > self.free:
                victim = running.pop()
                self._preempt(victim)
                preempted = True
                if victim is r:
                    break
            else:
                r.blocks += need
                self.free -= need
                scheduled.append((r, new))
                budget -= new
                i += 1
                continue
            break
        if not preempted:
            budget = self._admit(scheduled, budget)
        return scheduled, preempted

    def _admit(self, scheduled: list[tuple[Request, int]], budget: int) -> int:
        waiting, running = self.waiting, self.running
        while waiting and budget > 0 and len(running) < self.max_num_seqs:
            r = waiting[0]
            new = min(r.prompt + r.generated, budget)
            need = -(-new // self.block_size)
            if need > self.free:
                break
            waiting.popleft()
            running.append(r)
            r.blocks = need
            self.free -= need
            scheduled.append((r, new))
            budget -= new
        return budget

    def _preempt(self, victim: Request) -> None:
        self.free += victim.blocks
        victim.blocks = victim.computed = 0
        self.waiting.appendleft(victim)
        self.preemptions += 1

    def _one_step(self, scheduled: list[tuple[Request, int]]) -> list[Request]:
        prompt = prior = decodes = context = 0
        for r, new in scheduled:
            if new == 1 and r.generated:
                decodes += 1
                context += r.computed + 1
            else:
                prompt += new
                prior += new * (r.computed + new / 2.0)
        prompt_context = prompt + max(0.0, prior / prompt - prompt / 2.0) if prompt else 0.0
        end = self.now + self.step_time(prompt, prompt_context, decodes, context / decodes if decodes else 0.0)
        finished = []
        for r, new in scheduled:
            r.computed += new
            if r.computed == r.prompt + r.generated:
                r.generated += 1
                if r.first < 0:
                    r.first = end
                elif r.measured:
                    gap = end - r.last
                    self.gaps[gap] = self.gaps.get(gap, 0) + 1
                r.last = end
                if r.generated >= r.output:
                    finished.append(r)
        self.now = end
        return self._finish(finished)

    def _decode_run(self, horizon: float) -> list[Request]:
        running, n = self.running, len(self.running)
        steps = min(r.output - r.generated for r in running)
        context = sum(r.computed for r in running) / n + 1.0
        first = self.step_time(0, 0.0, n, context)
        if len(running) < self.max_num_seqs and horizon < math.inf:
            steps = min(steps, max(1, math.ceil((horizon - self.now) / first)))
        steps = self._kv_steps(steps)
        each = self.step_time(0, 0.0, n, context + (steps - 1) / 2.0) if steps > 1 else first
        end, bs = self.now + steps * each, self.block_size
        gaps, finished = self.gaps, []
        for r in running:
            r.computed += steps
            r.generated += steps
            blocks = -(-r.computed // bs)  # what the run's last step allocated
            if blocks > r.blocks:
                self.free -= blocks - r.blocks
                r.blocks = blocks
            if r.measured:
                gap = self.now + each - r.last
                gaps[gap] = gaps.get(gap, 0) + 1
                if steps > 1:
                    gaps[each] = gaps.get(each, 0) + steps - 1
            r.last = end
            if r.generated >= r.output:
                finished.append(r)
        self.now = end
        return self._finish(finished)

    def _kv_steps(self, steps: int) -> int:
        """The most decode steps (up to ``steps``) whose new KV blocks fit in the free ones (the first step's
        are allocated already)."""
        bs, running = self.block_size, self.running

        def need(k: int) -> int:
            return sum(max(0, -(-(r.computed + k) // bs) - r.blocks) for r in running)
        if self.free >= len(running) * (steps // bs + 1) or need(steps) <= self.free:
            return steps
        low, high = 1, steps
        while low < high:
            mid = (low + high + 1) // 2
            low, high = (mid, high) if need(mid) <= self.free else (low, mid - 1)
        return low

    def _finish(self, finished: list[Request]) -> list[Request]:
        for r in finished:
            r.finish = self.now
            self.free += r.blocks
            r.blocks = 0
        if finished:
            done = set(map(id, finished))
            self.running = [r for r in self.running if id(r) not in done]
        return finished
