"""Packing models onto shared servers optimally: branch and bound, seeded with first-fit decreasing.

Items have three sizes (GPU memory, GPU compute, host RAM), each bounded per server, and a *need*: the
replicas they ask of whatever server they land on. A server runs as many replicas as its neediest member,
so a packing costs the pods it needs, and the nodes those pods (and the zone spread) take.

Why not first-fit decreasing alone: every greedy bin-packing rule (first fit, best fit and their
decreasing forms) has anomalies where *adding* an item lowers the number of bins. Then adding a model to
models.yaml could lower an environment's cost, and a cost diff would tell a reviewer something false. An
optimal packing cannot do that: removing a model from an optimal packing of S + x leaves a packing of S
that is no dearer. The search finds the first-fit-decreasing packing first and replaces it only with a
strictly better one, so where FFD is already optimal (the usual case) its packing is kept.

The search is exact for up to ``EXACT_LIMIT`` items within ``EXACT_STEPS`` steps (milliseconds for
typical fleets); beyond either bound the best packing found so far is used: still deterministic, no longer
guaranteed optimal, so the monotonicity guarantee holds within those bounds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

EXACT_LIMIT = 24  # items per search; a packing of more is first-fit decreasing (plus what the budget finds)
EXACT_STEPS = 5_000  # search steps per packing problem: bounds the time on adversarial inputs

Sizes = tuple[float, float, float]


@dataclass(frozen=True)
class Item:
    name: str
    size: Sizes
    need: int  # replicas this item asks of its server
    floor: int  # replicas its availability alone asks; servers with a floor of 2+ spread over zones


@dataclass(frozen=True)
class Objective:
    """Nodes first, then pods: what the shared servers add to the servers packed outside the search."""

    gpus_per_node: int
    fixed_pods: int = 0
    fixed_spread: int = 0

    def score(self, pods: int, spread: int) -> tuple[int, int]:
        nodes = max(math.ceil(pods / self.gpus_per_node), spread) if pods else 0
        return nodes, pods


def _fits(used: Sizes, size: Sizes, limits: Sizes) -> bool:
    return all(u + s <= limit for u, s, limit in zip(used, size, limits))


def _add(used: Sizes, size: Sizes) -> Sizes:
    return (used[0] + size[0], used[1] + size[1], used[2] + size[2])


def first_fit(items: list[Item], limits: Sizes) -> list[list[int]]:
    """First fit in the given order (the caller sorts: need, then size, decreasing)."""
    bins: list[list[int]] = []
    used: list[Sizes] = []
    for index, item in enumerate(items):
        for b, load in enumerate(used):
            if _fits(load, item.size, limits):
                bins[b].append(index)
                used[b] = _add(load, item.size)
                break
        else:
            bins.append([index])
            used.append(item.size)
    return bins


def pack_optimally(items: list[Item], limits: Sizes, objective: Objective) -> list[list[str]]:
    """Groups of item names; ``items`` sorted by need (decreasing) first, as first-fit decreasing wants."""
    assert all(a.need >= b.need for a, b in zip(items, items[1:])), "items must be sorted by need, decreasing"
    # A limit no server can reach never binds: drop it, so instance types that differ only there (e.g. in
    # host RAM) pose the same problem and share one search through the cache. One at a time: each drop is
    # justified by the limits still in force, so those must stay in force for the next check.
    reachable = list(limits)
    for d in range(len(reachable)):
        if not _can_bind(items, tuple(reachable), d):  # type: ignore[arg-type]
            reachable[d] = math.inf
    return [list(group) for group in _solve(tuple(items), tuple(reachable), objective)]  # type: ignore[arg-type]


def _can_bind(items: list[Item], limits: Sizes, d: int) -> bool:
    """Whether limit ``d`` can bind: the other limits let a server hold at most ``most`` items (counting
    the smallest first); if the ``most`` largest items fit under limit ``d``, it never binds."""
    most = len(items)
    for other, limit in enumerate(limits):
        if other != d:
            total, count = 0.0, 0
            for size in sorted(it.size[other] for it in items):
                total += size
                if total > limit:
                    break
                count += 1
            most = min(most, count)
    return sum(sorted((it.size[d] for it in items), reverse=True)[:most]) > limits[d]


@lru_cache(maxsize=1024)
def _solve(items: tuple[Item, ...], limits: Sizes, objective: Objective) -> tuple[tuple[str, ...], ...]:
    first = first_fit(list(items), limits)
    if len(items) > EXACT_LIMIT:
        return tuple(tuple(items[i].name for i in b) for b in first)
    search = _Search(list(items), limits, objective, first)
    search.explore([], [], 0)
    return tuple(tuple(items[i].name for i in b) for b in search.best)


class _Search:
    def __init__(self, items: list[Item], limits: Sizes, objective: Objective, first: list[list[int]]) -> None:
        self.items, self.limits, self.objective = items, limits, objective
        self.suffix = [tuple(sum(it.size[d] for it in items[i:]) for d in range(3)) for i in range(len(items) + 1)]
        self.best, self.best_score = first, self.score(first)
        self.steps = 0

    def _pods_spread(self, bins: list[list[int]]) -> tuple[int, int]:
        pods, spread = self.objective.fixed_pods, self.objective.fixed_spread
        for members in bins:
            need = self.items[members[0]].need  # the first member is the neediest: items come by need
            pods += need
            lowest = min(max(self.items[i].floor for i in members), need)  # the server's min replicas
            if lowest >= 2:
                spread = max(spread, lowest)  # its replicas must sit in that many zones (nodes)
        return pods, spread

    def score(self, bins: list[list[int]]) -> tuple[int, int]:
        return self.objective.score(*self._pods_spread(bins))

    def lower_bound(self, bins: list[list[int]], used: list[Sizes], index: int) -> tuple[int, int]:
        """No completion does better: the servers still to open, each costing at least the smallest need
        left to place, are at least what the volume left over needs, and at least what the large models
        left need (see _big_left)."""
        pods, spread = self._pods_spread(bins)
        if index < len(self.items):
            extra = 0
            for d, limit in enumerate(self.limits):
                if limit <= 0 or limit == math.inf:
                    continue
                free = sum(limit - load[d] for load in used)
                extra = max(extra, math.ceil((self.suffix[index][d] - free) / limit - 1e-9),
                            self._big_left(used, index, d, limit))
            pods += extra * self.items[-1].need
        return self.objective.score(pods, spread)

    def _big_left(self, used: list[Sizes], index: int, d: int, limit: float) -> int:
        """Models over limit / (k + 1) fit at most k to a server; what the open servers cannot absorb of
        them (each at most free / the smallest of them) needs new servers, k per server."""
        bound = 0
        for k in (1, 2, 3, 4):
            sizes = [it.size[d] for it in self.items[index:] if it.size[d] > limit / (k + 1)]
            if sizes:
                smallest = min(sizes)
                absorb = sum(min(k, int((limit - load[d]) // smallest)) for load in used)
                bound = max(bound, math.ceil((len(sizes) - absorb) / k))
        return bound

    def explore(self, bins: list[list[int]], used: list[Sizes], index: int) -> None:
        if self.steps >= EXACT_STEPS:
            return
        self.steps += 1
        if index == len(self.items):
            score = self.score(bins)
            if score < self.best_score:
                self.best, self.best_score = [list(b) for b in bins], score
            return
        if self.lower_bound(bins, used, index) >= self.best_score:
            return
        item = self.items[index]
        tried: set[tuple[Sizes, int, int]] = set()
        for b, load in enumerate(used):
            # two servers alike in load, need and floor lead to the same packings: try one of them
            alike = (load, self.items[bins[b][0]].need, max(self.items[i].floor for i in bins[b]))
            if alike not in tried and _fits(load, item.size, self.limits):
                tried.add(alike)
                bins[b].append(index)
                used[b] = _add(load, item.size)
                self.explore(bins, used, index + 1)
                used[b] = load
                bins[b].pop()
        bins.append([index])
        used.append(item.size)
        self.explore(bins, used, index + 1)
        used.pop()
        bins.pop()
