"""The replica search (plan/llm/verify.py) when the simulated verdicts are not monotone in replicas.

Near the target a count can pass where one more fails (the runs' noise), and a closed loop of fixed lengths
runs in step on one replica while random routing over two lets its prompts collide. A layout timed with a
bound (it must beat the cheapest verified so far; may_serve_within's ceiling) must then still find what the
unbounded search finds: before, a reserved g6.12xlarge lost to a full-price g5.12xlarge, and an fp8 70B that
costs 35% less was never offered as an alternative, because the bounded search started elsewhere and gave up.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.plan.llm import search
from modelfleet.plan.llm.fit import first_guess, verifier_for
from modelfleet.plan.llm.speed.load import speed_of
from modelfleet.plan.llm.speed.performance import Layout
from modelfleet.plan.llm.verify import MAX_REPLICAS, Verdict, Verifier, smallest_passing
from modelfleet.spec.environment import EnvironmentSpec
from modelfleet.spec.models import LlmModelSpec

PROD = EnvironmentSpec(name="prod", region="us-east-1", instance_families=("g5", "g6", "g6e", "p4d", "p5"))


def _within(found: int | None, most: int) -> int | None:
    return found if found is not None and found <= most else None


@settings(max_examples=300, deadline=None)
@given(passes=st.lists(st.booleans(), min_size=40, max_size=40), guess=st.integers(1, 40), low=st.integers(1, 40),
       cut=st.integers(1, 40))
def test_a_cut_search_finds_what_the_uncut_one_finds_up_to_the_cut(passes, guess, low, cut):
    """Any predicate, monotone or not: with a cut the answer is the uncut answer when that is within the cut,
    and otherwise nothing within it."""
    ok = lambda r: passes[r - 1]  # noqa: E731
    low = min(low, guess)
    assert _within(smallest_passing(guess, low, 40, ok, cut=cut), cut) == _within(smallest_passing(guess, low, 40, ok),
                                                                                  cut)


def _verifier(screens: dict[int, bool], verdicts: dict[int, bool]) -> Verifier:
    """A Verifier whose verdicts at every count are given (True: meets), no simulation behind them."""
    verifier = Verifier.__new__(Verifier)
    verifier.screens = {r: Verdict(r, 1, 1, None, None if ok else "ttft") for r, ok in screens.items()}
    verifier.verdicts = {r: Verdict(r, 1, 1, None, None if ok else "ttft") for r, ok in verdicts.items()}
    return verifier


@settings(max_examples=150, deadline=None)
@given(data=st.data(), floor=st.integers(1, 3), guess=st.integers(1, 60), most=st.integers(1, 60))
def test_a_bounded_replica_search_agrees_with_the_unbounded_one(data, floor, guess, most):
    """Random pass/fail tables for the screens and the full runs (passing from some count on, with noise below
    and above it): the search bounded at ``most`` gives the unbounded answer when that is within ``most``."""
    edge = data.draw(st.integers(1, 60))
    noise = data.draw(st.sets(st.integers(1, 80), max_size=12))

    def table() -> dict[int, bool]:
        return {r: (r >= edge) != (r in noise) for r in range(1, MAX_REPLICAS + 1)}
    screens, verdicts = table(), table()
    unbounded = _verifier(screens, verdicts).least_replicas(guess, floor, MAX_REPLICAS)
    assert _verifier(screens, verdicts).least_replicas(guess, floor, most) == _within(unbounded, most)


def test_a_floor_that_meets_the_sla_is_chosen_whatever_the_counts_above_it_do():
    """A llama-3.1-8b under 50 closed-loop users with 7,936-token prompts on a g6.12xlarge (tp=4): one replica
    meets the 20 s p99 TTFT, while random routing over a few replicas misses it in some runs. The plan is one
    replica, bounded or not, and the layout search picks it."""
    catalogue = load_instance_catalogue()
    model = LlmModelSpec.model_validate({
        "name": "m0", "type": "llm", "artifact": "org/m0", "size": {"dtype": "bf16"}, "architecture": "llama-3.1-8b",
        "sla": {"max_context_tokens": 8192, "peak_concurrent_sequences": 50, "p99_ttft_ms": 20000,
                "availability": 99.0}})
    instance = catalogue.instances["g6.12xlarge"]
    demand = search.demand_of(model, PROD)
    sized = search.size_layout(model, PROD, catalogue, instance, 4, 1, False, demand, {})
    speed = speed_of(search.gpu_for(instance.gpu), sized.shape, Layout(4, 1, False), demand.input_tokens,
                     demand.output_tokens, None)
    guess = first_guess(speed, demand, sized.kv_seqs)
    verifier = verifier_for(speed, demand, guess.options, sized.kv_tokens)
    assert demand.floor == 1 and verifier.screen(1).miss is None and verifier.verify(1).miss is None
    assert [verifier.least_replicas(guess.replicas, 1, most) for most in (MAX_REPLICAS, 3, 2, 1)] == [1, 1, 1, 1]
    chosen, _, _ = search.choose_llm_layout(model, PROD, catalogue, 0)
    assert (chosen.instance.name, chosen.tp, chosen.fit.replicas) == ("g6.12xlarge", 4, 1)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), floor=st.integers(1, 3), guess=st.integers(1, 60))
def test_a_screen_that_misses_by_noise_does_not_cost_a_replica(data, floor, guess):
    """Full runs pass from ``edge`` on, screens only from a later count (a short run's p99 missing by noise):
    the search returns the full runs' edge, not the screens', as long as a screen passes somewhere."""
    edge = data.draw(st.integers(floor, 40))
    late = data.draw(st.integers(edge, 45))
    screens = {r: r >= late for r in range(1, MAX_REPLICAS + 1)}
    verdicts = {r: r >= edge for r in range(1, MAX_REPLICAS + 1)}
    assert _verifier(screens, verdicts).least_replicas(guess, floor, MAX_REPLICAS) == edge
