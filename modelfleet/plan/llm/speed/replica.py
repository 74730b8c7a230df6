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
admitted) is taken at once, up to the next completion or the step at which the KV cache would run out, and
cut short at the first step boundary after an arrival that could be admitted (``cut``); its step time is
taken at the run's mean context (step time is linear in it). So a simulation costs a few events per request,
not a Python loop per token.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Callable

from .steptime import StepTimer

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
        # the plan's step time, called natively where both are compiled (steptime.py); any other callable
        # (a test's) through step_time
        self.timer: StepTimer | None = step_time if isinstance(step_time, StepTimer) else None
        self.free, self.block_size = kv_blocks, block_size
        self.running: list[Request] = []
        self.waiting: deque[Request] = deque()
        self.now = 0.0
        self.preemptions = 0
        self.gaps: dict[float, int] = {}  # inter-token gap (ms) -> how many measured tokens had it
        self.run: tuple[int, float, float] | None = None  # a pending decode run: (steps, mean context, first step ms)
        self.busy = False  # a step (or run) is under way
        self.decode_only = False  # the last schedule: every request scheduled is decoding, none admitted

    def idle(self) -> bool:
        return not self.running and not self.waiting

    def begin(self) -> tuple[float, list[Request]]:
        """Start the next step at ``now``: (when it ends, the requests it finished). A single step is carried
        out at once; a run of identical decode steps is pending until ``complete`` (or cut short by ``cut``)."""
        scheduled, preempted = self._schedule()
        if not scheduled:  # the only running request preempted itself: the next schedule admits it
            scheduled, preempted = self._schedule()
            if not scheduled:
                head = self.waiting[0]
                raise ValueError(f"a request of {head.prompt + head.output} tokens does not fit the KV cache "
                                 f"({self.free} blocks of {self.block_size} free)")
        if not preempted and self.decode_only and len(scheduled) == len(self.running):
            return self._plan_run(), []
        finished = self._one_step(scheduled)
        return self.now, finished

    def cut(self, arrival: float) -> float | None:
        """An arrival that could be admitted ends a pending run at the first step boundary after it: the new
        end, or None when nothing changes (no run pending, or every slot taken)."""
        if self.run is None or len(self.running) >= self.max_num_seqs:
            return None
        steps, context, first = self.run
        shorter = min(steps, max(1, math.ceil((arrival - self.now) / first)))
        if shorter == steps:
            return None
        self.run = (shorter, context, first)
        return self.now + shorter * self._each(shorter)

    def complete(self) -> list[Request]:
        """Carry out the pending run, if any: the requests it finished."""
        if self.run is None:
            return []
        steps = self.run[0]
        return self._commit_run(steps, self._each(steps))

    def _schedule(self) -> tuple[list[tuple[Request, int]], bool]:
        budget, bs, running = self.budget, self.block_size, self.running
        scheduled: list[tuple[Request, int]] = []
        append = scheduled.append
        preempted, i, free, decode_only, n = False, 0, self.free, True, len(running)
        while i < n and budget > 0:
            r = running[i]
            computed, generated = r.computed, r.generated
            new = r.prompt + generated - computed
            if new > budget:
                new = budget
            if new != 1 or not generated:
                decode_only = False
            need = -(-(computed + new) // bs) - r.blocks
            if need > free:
                self.free = free
                while need > self.free:
                    victim = running.pop()
                    self._preempt(victim)
                    preempted = True
                    if victim is r:
                        break
                free, n = self.free, len(running)
                if victim is r:
                    break
            if need:
                r.blocks += need
                free -= need
            append((r, new))
            budget -= new
            i += 1
        self.free = free
        count = len(scheduled)
        if not preempted and self.waiting:
            self._admit(scheduled, budget)
        self.decode_only = decode_only and len(scheduled) == count  # nothing admitted
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

    def _step(self, prompt: int, prompt_context: float, decodes: int, decode_context: float) -> float:
        timer = self.timer
        if timer is not None:
            return timer.time(prompt, prompt_context, decodes, decode_context)
        return self.step_time(prompt, prompt_context, decodes, decode_context)

    def _preempt(self, victim: Request) -> None:
        self.free += victim.blocks
        victim.blocks = victim.computed = 0
        self.waiting.appendleft(victim)
        self.preemptions += 1

    def _one_step(self, scheduled: list[tuple[Request, int]]) -> list[Request]:
        prompt = decodes = context = 0
        prior = 0.0
        for r, new in scheduled:
            if new == 1 and r.generated:
                decodes += 1
                context += r.computed + 1
            else:
                prompt += new
                prior += new * (r.computed + new / 2.0)
        prompt_context = prompt + max(0.0, prior / prompt - prompt / 2.0) if prompt else 0.0
        end = self.now + self._step(prompt, prompt_context, decodes, context / decodes if decodes else 0.0)
        finished = []
        gaps = self.gaps
        for r, new in scheduled:
            computed = r.computed = r.computed + new
            if computed == r.prompt + r.generated:
                r.generated += 1
                if r.first < 0:
                    r.first = end
                elif r.measured:
                    gap = end - r.last
                    gaps[gap] = gaps.get(gap, 0) + 1
                r.last = end
                if r.generated >= r.output:
                    finished.append(r)
        self.now = end
        return self._finish(finished) if finished else finished

    def _plan_run(self) -> float:
        running, n = self.running, len(self.running)
        steps, total = running[0].output - running[0].generated, 0
        for r in running:
            left = r.output - r.generated
            if left < steps:
                steps = left
            total += r.computed
        context = total / n + 1.0
        self.run = (self._kv_steps(steps), context, self._step(0, 0.0, n, context))
        return self.now + self.run[0] * self._each(self.run[0])

    def _each(self, steps: int) -> float:
        """One step's time in a run of ``steps``: at the run's mean context."""
        run = self.run
        assert run is not None
        _, context, first = run
        return self._step(0, 0.0, len(self.running), context + (steps - 1) / 2.0) if steps > 1 else first

    def _commit_run(self, steps: int, each: float) -> list[Request]:
        now, bs = self.now, self.block_size
        end = now + steps * each
        gaps, finished, free, counted = self.gaps, [], self.free, 0
        for r in self.running:
            computed = r.computed = r.computed + steps
            r.generated += steps
            blocks = -(-computed // bs)  # what the run's last step allocated
            if blocks > r.blocks:
                free -= blocks - r.blocks
                r.blocks = blocks
            if r.measured:
                counted += 1
                if r.last != now:  # not decoded in the step before the run: its first gap is longer
                    gap = now + each - r.last
                    gaps[gap] = gaps.get(gap, 0) + 1
                    counted -= 1
            r.last = end
            if r.generated >= r.output:
                finished.append(r)
        if counted or steps > 1:
            measured = sum(1 for r in self.running if r.measured)
            gaps[each] = gaps.get(each, 0) + counted + measured * (steps - 1)
        self.free, self.now, self.run = free, end, None
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
