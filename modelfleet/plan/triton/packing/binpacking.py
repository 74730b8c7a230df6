"""Packing models onto shared servers optimally: branch and bound, seeded with first-fit decreasing.

Items have three sizes (GPU memory, GPU compute, host RAM) and a *need*: the replicas they ask of whatever
server they land on. GPU memory and host RAM are bounded per server (every replica loads every member).
Compute is not: a server runs as many replicas as its neediest member asks, or as its members' compute
takes at ``limits[COMPUTE]`` per replica, whichever is more (packing._replicas' rule). A server held at
one GPU of compute while it runs two replicas for availability wastes the second (the 30-small-model
fleet needed 3 pods where 2 hold it). A packing costs the pods it needs, and the nodes those pods (and the
zone spread) take. Removing an item never raises a server's replicas, so optimal packings stay monotone.

Why not first-fit decreasing alone: every greedy bin-packing rule (first fit, best fit and their
decreasing forms) has anomalies where *adding* an item lowers the number of bins. Then adding a model to
models.yaml could lower an environment's cost, and a cost diff would tell a reviewer something false. An
optimal packing cannot do that: removing a model from an optimal packing of S + x leaves a packing of S
that is no dearer. The search starts from the first-fit-decreasing packing (improved by shedding, below)
and replaces it only with a strictly better one, so where that is already optimal (the usual case) it is
kept.

The search is exact for up to ``EXACT_LIMIT`` items within ``EXACT_STEPS`` steps (milliseconds for
typical fleets); beyond either bound the best packing found so far is used: still deterministic, no longer
guaranteed optimal, so the monotonicity guarantee holds within those bounds. Beyond them the first-fit
packing is improved by shedding (moves and swaps that save replicas, ``shed_replicas``): fleets of 100 to
1,000 small models land within 8% of the lower bound (bench/packing.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

EXACT_LIMIT = 24  # items per search; a packing of more is first-fit decreasing (plus what the budget finds)
EXACT_STEPS = 5_000  # search steps per packing problem: bounds the time on adversarial inputs

# Shedding swaps one of the donor's heaviest models for one of another server's lightest: this many of each
# (bounds the time on fleets of thousands; the heaviest and lightest are where the large differences are).
SWAP_CANDIDATES = 12
SHED_STEPS = 400_000  # candidate checks per packing problem; a fleet of a few hundred models needs far fewer

Sizes = tuple[float, float, float]
MEMORY, COMPUTE, HOST = range(3)
BOUNDED = (MEMORY, HOST)  # per-server limits; compute sets the replicas instead


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
    # A server runs at most this many replicas (1 where the environment runs single replicas): its compute
    # is then bounded by them instead of setting them.
    max_replicas: float = math.inf

    def score(self, pods: int, spread: int) -> tuple[int, int]:
        nodes = max(math.ceil(pods / self.gpus_per_node), spread) if pods else 0
        return nodes, pods


def _fits(used: Sizes, size: Sizes, limits: Sizes, max_replicas: float = math.inf) -> bool:
    # The BOUNDED dimensions written out: the hottest test of packing (half a million calls at 1,000 models).
    return (used[MEMORY] + size[MEMORY] <= limits[MEMORY] and used[HOST] + size[HOST] <= limits[HOST]
            and used[COMPUTE] + size[COMPUTE] <= limits[COMPUTE] * max_replicas + 1e-9)


def replicas(need: int, compute: float, per_replica: float) -> int:
    """A server's replicas: its neediest member's need, or what its compute takes, whichever is more."""
    return max(need, math.ceil(compute / per_replica - 1e-9))


def _add(used: Sizes, size: Sizes) -> Sizes:
    return (used[0] + size[0], used[1] + size[1], used[2] + size[2])


def first_fit(items: list[Item], limits: Sizes, max_replicas: float = math.inf) -> list[list[int]]:
    """First fit in the given order (the caller sorts: need, then size, decreasing), except that a server
    whose replicas still have room for the item's compute comes first (the one left with the least room,
    best fit): compute then fills whole replicas before any server grows by one. Servers too full for the
    smallest model left are closed and no longer scanned."""
    bins: list[list[int]] = []
    used: list[Sizes] = []
    open_bins: list[int] = []
    smallest = _smallest_left(items)
    for index, item in enumerate(items):
        chosen, best = None, math.inf
        for b in open_bins:
            if _fits(used[b], item.size, limits, max_replicas):
                left = _room(items[bins[b][0]].need, used[b], limits) - item.size[COMPUTE]
                if left >= -1e-9 and left < best:
                    chosen, best = b, left
                elif chosen is None:
                    chosen = b
        if chosen is None:
            bins.append([index])
            used.append(item.size)
            open_bins.append(len(bins) - 1)
        else:
            bins[chosen].append(index)
            used[chosen] = _add(used[chosen], item.size)
        open_bins = [b for b in open_bins if all(used[b][d] + smallest[index][d] <= limits[d] for d in BOUNDED)]
    return bins


def _smallest_left(items: list[Item]) -> list[Sizes]:
    """Per position, the smallest memory and host RAM among the items after it (inf when none is left)."""
    out: list[Sizes] = []
    low = (math.inf, 0.0, math.inf)
    for item in reversed(items):
        out.append(low)
        low = (min(low[MEMORY], item.size[MEMORY]), 0.0, min(low[HOST], item.size[HOST]))
    return out[::-1]


def shed_replicas(items: list[Item], bins: list[list[int]], limits: Sizes) -> list[list[int]]:
    """Local improvement: a server just past a whole replica of compute sheds models to servers whose
    replicas have room for them (moving, or swapping for lighter models where memory is full), when that
    saves a replica; repeated until none does or ``SHED_STEPS`` candidate checks are spent. Memory fills
    servers at arbitrary compute, and each server's last fraction of a replica is waste. Every change
    saves a replica, so it ends; the budget bounds the time on fleets of thousands (deterministically)."""
    servers = _Servers(items, bins, limits)
    improved = True
    while improved:  # whole passes: a donor that failed may succeed once others have changed
        improved = False
        for donor in range(len(bins)):
            while servers.shed(donor):
                improved = True
    return [sorted(b) for b in servers.bins if b]  # the neediest first again: items come sorted by need


class _Servers:
    """Servers under local improvement: members, loads, and each one's replicas and zone spread, which
    stay fixed for the others while one sheds (moves are undone when it cannot save a replica)."""

    def __init__(self, items: list[Item], bins: list[list[int]], limits: Sizes) -> None:
        self.items, self.limits, self.per = items, limits, limits[COMPUTE]
        self.compute = [item.size[COMPUTE] for item in items]
        self.bins = [list(b) for b in bins]
        self.used = [_total(items, b) for b in self.bins]
        self.caps, self.spreads = [0] * len(bins), [0] * len(bins)
        for b in range(len(bins)):
            self._refresh(b)
        self.steps = 0

    def _refresh(self, b: int) -> None:
        members = self.bins[b]
        need = max((self.items[i].need for i in members), default=0)
        self.caps[b] = replicas(need, self.used[b][COMPUTE], self.per) if members else 0
        self.spreads[b] = min(max((self.items[i].floor for i in members), default=0), self.caps[b])

    def shed(self, donor: int) -> bool:
        """Save the donor one replica, or change nothing."""
        before = self.caps[donor]
        need = max((self.items[i].need for i in self.bins[donor]), default=0)
        if before <= need or self.steps >= SHED_STEPS:
            return False  # its replicas are what availability asks (or the budget is spent)
        excess = self.used[donor][COMPUTE] - (before - 1) * self.per
        if sum(c * self.per - u[COMPUTE] for c, u in zip(self.caps, self.used)) < excess + (
                before * self.per - self.used[donor][COMPUTE]) - 1e-9:
            return False  # the others' replicas cannot take that much compute, however models move
        log: list[tuple[int, int, int]] = []
        shed = 0.0
        while shed < excess - 1e-9:
            step = self._move(donor, log) or self._swap(donor, log)
            if step <= 0:
                break
            shed += step
        after = replicas(max((self.items[i].need for i in self.bins[donor]), default=0), self.used[donor][COMPUTE],
                         self.per)
        if shed < excess - 1e-9 or after >= before:
            for index, source, target in reversed(log):
                self._relocate(index, target, source)
            return False
        for b in {donor, *(t for _, _, t in log), *(s for _, s, _ in log)}:
            self._refresh(b)
        return True

    def _joins(self, index: int, target: int) -> bool:
        """The model asks no more replicas, and no wider zone spread, than the target already runs."""
        item = self.items[index]
        cap = self.caps[target]
        return item.need <= cap and min(item.floor, cap) <= max(self.spreads[target], 1)

    def _move(self, donor: int, log: list[tuple[int, int, int]]) -> float:
        """Move the donor's smallest-compute model that another server takes within its replicas.

        Every server is one step, as the budget counts candidate checks. The tests of _fits and _joins are
        written out: this loop is most of a packing's time at 1,000 models."""
        bins, used, caps, spreads, per = self.bins, self.used, self.caps, self.spreads, self.per
        memory, host = self.limits[MEMORY], self.limits[HOST]
        unbounded = self.limits[COMPUTE] * math.inf + 1e-9  # _fits' compute test, no replica cap
        for index in sorted(bins[donor], key=lambda i: (self.compute[i], i)):
            item = self.items[index]
            size, need, floor = item.size, item.need, item.floor
            for target, load in enumerate(used):
                cap = caps[target]
                if (target != donor and bins[target] and load[MEMORY] + size[MEMORY] <= memory
                        and load[HOST] + size[HOST] <= host and load[COMPUTE] + size[COMPUTE] <= unbounded
                        and load[COMPUTE] + size[COMPUTE] <= cap * per + 1e-9
                        and need <= cap and min(floor, cap) <= max(spreads[target], 1)):
                    self.steps += target + 1
                    self._relocate(index, donor, target, log)
                    return size[COMPUTE]
            self.steps += len(used)
        return 0.0

    def _swap(self, donor: int, log: list[tuple[int, int, int]]) -> float:
        """Exchange one of the donor's heaviest models for one of another server's lightest (memory full,
        so nothing simply moves): the largest difference the other server's replicas have room for."""
        best: tuple[float, int, int, int] | None = None
        gives = [(self.compute[i], self.items[i].need, self.items[i].floor, i)
                 for i in sorted(self.bins[donor], key=lambda i: -self.compute[i])[:SWAP_CANDIDATES]]
        for target, load in enumerate(self.used):
            if gives and best is not None and gives[0][0] <= best[0]:
                break  # not even the heaviest give beats the best difference (which only grows): no steps left
            room = self.caps[target] * self.per - load[COMPUTE]
            if target == donor or not self.bins[target] or room <= 1e-9:
                continue
            best = self._best_pair(donor, target, gives, room, best)
        if best is None:
            return 0.0
        delta, give, take, target = best
        self._relocate(give, donor, target, log)
        self._relocate(take, target, donor, log)
        return delta

    def _best_pair(self, donor: int, target: int, gives: list[tuple[float, int, int, int]], room: float,
                   best: tuple[float, int, int, int] | None) -> tuple[float, int, int, int] | None:
        """``gives``: (compute, need, floor, index) of the donor's heaviest. _joins is written out (this is
        the hottest loop of shedding), and the target's lightest are sorted only once a give may join it.

        Takes come lightest first, so differences only shrink: when even the heaviest take leaves a
        difference over the room (and over the best), every take is a step that neither stops nor fits,
        and they are counted at once."""
        compute = self.compute
        cap, spread = self.caps[target], max(self.spreads[target], 1)
        takes: list[int] | None = None
        for give_compute, need, floor, give in gives:
            if best is not None and give_compute <= best[0]:
                break  # no lighter take can beat the best difference found
            if need > cap or min(floor, cap) > spread:
                continue  # it would not join the target (_joins)
            if takes is None:
                takes = sorted(self.bins[target], key=lambda i: compute[i])[:SWAP_CANDIDATES]
            least = give_compute - compute[takes[-1]]
            if least > room + 1e-9 and least > 0 and (best is None or least > best[0]):
                self.steps += len(takes)
                continue
            for take in takes:
                self.steps += 1
                delta = give_compute - compute[take]
                if delta <= 0 or (best is not None and delta <= best[0]):
                    break
                if delta <= room + 1e-9 and _swappable(self.items, self.used, self.limits, (donor, give),
                                                       (target, take)):
                    best = (delta, give, take, target)
                    break
        return best

    def _relocate(self, index: int, source: int, target: int, log: list[tuple[int, int, int]] | None = None) -> None:
        self.bins[source].remove(index)
        self.bins[target].append(index)
        size = self.items[index].size
        self.used[source] = tuple(u - s for u, s in zip(self.used[source], size))  # type: ignore[assignment]
        self.used[target] = _add(self.used[target], size)
        if log is not None:
            log.append((index, source, target))


def _swappable(items: list[Item], used: list[Sizes], limits: Sizes, a: tuple[int, int], b: tuple[int, int]) -> bool:
    (bin_a, item_a), (bin_b, item_b) = a, b
    size_a, size_b, used_a, used_b = items[item_a].size, items[item_b].size, used[bin_a], used[bin_b]
    return (used_a[MEMORY] - size_a[MEMORY] + size_b[MEMORY] <= limits[MEMORY]
            and used_b[MEMORY] - size_b[MEMORY] + size_a[MEMORY] <= limits[MEMORY]
            and used_a[HOST] - size_a[HOST] + size_b[HOST] <= limits[HOST]
            and used_b[HOST] - size_b[HOST] + size_a[HOST] <= limits[HOST])


def _total(items: list[Item], members: list[int]) -> Sizes:
    return tuple(sum(items[i].size[d] for i in members) for d in range(3))  # type: ignore[return-value]


def _room(need: int, load: Sizes, limits: Sizes) -> float:
    """Compute the server's current replicas can still take."""
    return replicas(need, load[COMPUTE], limits[COMPUTE]) * limits[COMPUTE] - load[COMPUTE]


def pack_optimally(items: list[Item], limits: Sizes, objective: Objective) -> list[list[str]]:
    """Groups of item names; ``items`` sorted by need (decreasing) first, as first-fit decreasing wants."""
    assert all(a.need >= b.need for a, b in zip(items, items[1:])), "items must be sorted by need, decreasing"
    # A limit no server can reach never binds: drop it, so instance types that differ only there (e.g. in
    # host RAM) pose the same problem and share one search through the cache. One at a time: each drop is
    # justified by the limits still in force, so those must stay in force for the next check.
    reachable = list(limits)
    for d in BOUNDED:
        if not _can_bind(items, tuple(reachable), d):  # type: ignore[arg-type]
            reachable[d] = math.inf
    return [list(group) for group in _solve(tuple(items), tuple(reachable), objective)]  # type: ignore[arg-type]


def _can_bind(items: list[Item], limits: Sizes, d: int) -> bool:
    """Whether limit ``d`` can bind: the other limits let a server hold at most ``most`` items (counting
    the smallest first); if the ``most`` largest items fit under limit ``d``, it never binds."""
    most = len(items)
    for other in BOUNDED:
        limit = limits[other]
        if other != d:
            total, count = 0.0, 0
            for size in sorted(it.size[other] for it in items):
                total += size
                if total > limit:
                    break
                count += 1
            most = min(most, count)
    return sum(sorted((it.size[d] for it in items), reverse=True)[:most]) > limits[d]


@lru_cache(maxsize=256)
def _seed(items: tuple[Item, ...], limits: Sizes, max_replicas: float) -> tuple[tuple[int, ...], ...]:
    """First fit, then shedding: independent of the objective, so instance types that pose the same
    problem (same GPU memory and binding host RAM) share it."""
    packed = first_fit(list(items), limits, max_replicas)
    return tuple(tuple(b) for b in shed_replicas(list(items), packed, limits))


@lru_cache(maxsize=1024)
def _solve(items: tuple[Item, ...], limits: Sizes, objective: Objective) -> tuple[tuple[str, ...], ...]:
    first = [list(b) for b in _seed(items, limits, objective.max_replicas)]
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
            count = replicas(need, sum(self.items[i].size[COMPUTE] for i in members), self.limits[COMPUTE])
            pods += count
            lowest = min(max(self.items[i].floor for i in members), count)  # the server's min replicas
            if lowest >= 2:
                spread = max(spread, lowest)  # its replicas must sit in that many zones (nodes)
        return pods, spread

    def score(self, bins: list[list[int]]) -> tuple[int, int]:
        return self.objective.score(*self._pods_spread(bins))

    def lower_bound(self, bins: list[list[int]], used: list[Sizes], index: int) -> tuple[int, int]:
        """No completion does better: the servers still to open, each costing at least the smallest need
        left to place, are at least what the memory or host RAM left over needs, and at least what the
        large models left need (see _big_left); and compute left beyond the open servers' spare replica
        capacity takes at least that many more pods."""
        pods, spread = self._pods_spread(bins)
        if index < len(self.items):
            extra = 0
            for d in BOUNDED:
                limit = self.limits[d]
                if limit <= 0 or limit == math.inf:
                    continue
                free = sum(limit - load[d] for load in used)
                extra = max(extra, math.ceil((self.suffix[index][d] - free) / limit - 1e-9),
                            self._big_left(used, index, d, limit))
            per_replica = self.limits[COMPUTE]
            slack = sum(replicas(self.items[b[0]].need, load[COMPUTE], per_replica) * per_replica - load[COMPUTE]
                        for b, load in zip(bins, used))
            overflow = math.ceil((self.suffix[index][COMPUTE] - slack) / per_replica - 1e-9)
            pods += max(extra * self.items[-1].need, overflow)
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
            if alike not in tried and _fits(load, item.size, self.limits, self.objective.max_replicas):
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
