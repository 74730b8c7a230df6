"""The LLMs' simulations run in forked workers before the compile (plan/prewarm.py): the plan is the one a
single process makes, byte for byte, and the compile that follows runs no simulation the workers ran."""

from __future__ import annotations

import multiprocessing
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelfleet.errors import CompileError, SpecError
from modelfleet.plan.compiler import compile_fleet
from modelfleet.plan.llm.precision_choice import search_key
from modelfleet.plan.prewarm import distinct_searches, llms_of, prewarm_simulations
from modelfleet.plan.llm.speed import peak
from modelfleet.plan.llm.speed.calibration import gpu_for
from modelfleet.plan.llm.speed.load import Speed
from modelfleet.plan.llm.speed.peak import SIMULATIONS, SimulationMemo, Traffic
from modelfleet.plan.llm.speed.performance import Layout, shape_from_fields
from modelfleet.plan.llm.speed.workload import Lengths
from modelfleet.program.main import MAX_WORKERS, workers_from
from modelfleet.render.fleet import to_json
from modelfleet.spec.models import FleetSpec, LlmModelSpec
from modelfleet.spec.presets import LLM_PRESETS

from tests.cost.fleets import capacity_environments, fleets

pytestmark = pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")


def forget() -> None:
    """Every memo in modelfleet cleared (the simulations' and functools'), as a fresh command starts: a fork
    would otherwise inherit searches already memoised upstream of the simulations, and run none."""
    for name, module in list(sys.modules.items()):
        if name == "modelfleet" or name.startswith("modelfleet."):
            for value in vars(module).values():
                if not isinstance(value, type) and callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


@pytest.fixture
def cold_memo():
    """Cold memos for the test, the process's simulations put back after it (other tests keep their hits)."""
    saved = dict(SIMULATIONS.entries)
    forget()
    yield SIMULATIONS
    SIMULATIONS.cache_clear()
    SIMULATIONS.entries.update(saved)


def _compiled(fleet, env, catalogue, lock=None) -> bytes | str:
    try:
        return to_json(compile_fleet(fleet, env, catalogue, lock).model_dump(mode="json"))
    except CompileError as error:
        return "\n".join(map(str, error.issues))


def test_prod_after_prewarm_is_the_single_process_plan_and_runs_no_simulation(project, catalogue, cold_memo):
    fleet, env = project.fleet(), project.environment("prod")
    added = prewarm_simulations(llms_of(fleet, env), env, catalogue, workers=2)
    assert added > 0
    prewarmed = _compiled(fleet, env, catalogue)
    assert len(cold_memo) == added  # the compile found every simulation it needed in the memo
    forget()
    assert _compiled(fleet, env, catalogue) == prewarmed
    assert len(cold_memo) == added  # one process alone runs the same simulations the workers ran


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(models=fleets(max_models=4), env=capacity_environments(), workers=st.integers(2, 3))
def test_prewarmed_plans_equal_single_process_plans_on_generated_fleets(catalogue, models, env, workers):
    """Reservations included: the workers search each LLM with every reservation free, the compile places them
    one after another; whatever the workers ran, the plan (or its errors) is the single process's."""
    fleet = FleetSpec(models=models)
    saved = dict(SIMULATIONS.entries)
    try:
        forget()
        alone = _compiled(fleet, env, catalogue)
        forget()
        prewarm_simulations(llms_of(fleet, env), env, catalogue, workers=workers)
        assert _compiled(fleet, env, catalogue) == alone
    finally:
        SIMULATIONS.cache_clear()
        SIMULATIONS.entries.update(saved)


def test_models_that_differ_only_in_name_or_revision_are_searched_once(project, catalogue, cold_memo):
    """prod's LLMs, each also under a second name and revision: the workers search each spec once (distinct_searches), and
    the compile of the doubled fleet finds every simulation it needs, the copies' too (their seeds are the
    traffic's, not the name's). A copy with another SLA is its own search."""
    fleet, env = project.fleet(), project.environment("prod")
    llms = llms_of(fleet, env)
    copies = [m.model_copy(update={"name": f"{m.name}-copy", "revision": "f" * 40}) for _, m in llms]
    doubled = FleetSpec(models=[*fleet.models, *copies])
    assert distinct_searches(llms_of(doubled, env)) == llms
    changed = copies[0].model_copy(update={"sla": copies[0].sla.model_copy(update={"p99_ttft_ms": 99_000})})
    assert distinct_searches([*llms, (len(doubled.models), changed)])[-1][1] is changed
    added = prewarm_simulations(llms_of(doubled, env), env, catalogue, workers=2)
    _compiled(doubled, env, catalogue)
    assert added > 0 and len(cold_memo) == added


def test_one_worker_or_one_llm_forks_nothing(project, catalogue, cold_memo):
    fleet, env = project.fleet(), project.environment("prod")
    llms = llms_of(fleet, env)
    assert len(llms) >= 2
    assert prewarm_simulations(llms, env, catalogue, workers=1) == 0
    assert prewarm_simulations(llms[:1], env, catalogue, workers=4) == 0
    assert len(cold_memo) == 0


def test_a_failing_search_in_a_worker_leaves_the_compile_to_report_it(project, catalogue, cold_memo, monkeypatch):
    """A worker whose search raises hands back what it ran before; the compile then raises the error itself."""
    fleet, env = project.fleet(), project.environment("prod")

    def broken(*args, **kwargs):
        raise RuntimeError("worker failure")
    monkeypatch.setattr("modelfleet.plan.prewarm.choose_precision", broken)
    assert prewarm_simulations(llms_of(fleet, env), env, catalogue, workers=2) == 0


def test_equal_layouts_share_a_simulation_whatever_speed_object_carries_them(project, catalogue, cold_memo):
    """The memo is keyed by value (peak.simulation_key): a Speed built anew for the same GPU, shape and layout,
    or for another request shape (the traffic carries the lengths), finds the first one's run."""
    gpu = gpu_for(catalogue.instances["g6e.xlarge"].gpu)
    shape = shape_from_fields(LLM_PRESETS["llama-3.1-8b"].fields)
    traffic = Traffic(arrivals="poisson", rate_per_s=2.0, input=Lengths(mean=512.0), output=Lengths(mean=128.0))
    first = Speed(gpu, shape, Layout(1, 1, False), 512, 128, None)
    again = Speed(gpu, shape, Layout(1, 1, False), 1024, 64, None)
    one = peak.simulated(first, traffic, 64, 2048, 200_000, 1, 1000.0, None, seed=7, requests=200)
    assert len(cold_memo) == 1
    other = peak.simulated(again, traffic, 64, 2048, 200_000, 1, 1000.0, None, seed=7, requests=200)
    assert other is one and len(cold_memo) == 1
    peak.simulated(first, traffic, 64, 2048, 200_000, 1, 1000.0, None, seed=8, requests=200)
    assert len(cold_memo) == 2  # another seed is another run


def test_the_memo_drops_its_oldest_half_at_its_limit_and_records_only_new_entries():
    memo = SimulationMemo(limit=4)
    for i in range(4):
        memo.put((i,), None)
    memo.put((4,), None)
    assert list(memo.entries) == [(2,), (3,), (4,)]
    memo.recorded = []
    memo.update([((3,), None), ((5,), None)])
    assert memo.recorded == [((5,), None)]
    memo.cache_clear()
    assert len(memo) == 0


@pytest.mark.parametrize("value, expected", [(None, 1), ("1", 1), ("4", 4), (" 2 ", 2), (str(MAX_WORKERS), MAX_WORKERS)])
def test_the_programs_worker_count(value, expected):
    assert workers_from({} if value is None else {"MODELFLEET_WORKERS": value}) == expected


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", "", str(MAX_WORKERS + 1)])
def test_a_bad_worker_count_is_a_located_error_with_the_fix(value):
    with pytest.raises(SpecError) as caught:
        workers_from({"MODELFLEET_WORKERS": value})
    issue = caught.value.issues[0]
    assert issue.file == "MODELFLEET_WORKERS" and repr(value.strip()) in issue.message
    assert "MODELFLEET_WORKERS=4" in issue.fix


def _without_team(value):
    """A plan as JSON data with every ``team`` left out (the one field the twins below differ in)."""
    if isinstance(value, dict):
        return {k: _without_team(v) for k, v in value.items() if k != "team"}
    if isinstance(value, list):
        return [_without_team(v) for v in value]
    return value


def _plan_data(fleet, env, catalogue):
    try:
        return _without_team(compile_fleet(fleet, env, catalogue).model_dump(mode="json"))
    except CompileError as error:
        return [str(issue) for issue in error.issues]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(models=fleets(max_models=3), env=capacity_environments(), auto=st.booleans())
def test_a_copy_planned_from_its_twins_search_is_planned_as_by_its_own(catalogue, models, env, auto):
    """The compile searches each search_key once (compiler.compile_fleet): a copy of an LLM under another name,
    artifact and revision takes its twin's layout. The same copies under another team (a field the search does
    not read, but the key holds) are searched on their own: every plan is the same, reservations and
    ``precision: auto`` included."""
    llms = [m for m in models if isinstance(m, LlmModelSpec)]
    if auto:
        models = [m.model_copy(update={"precision": "auto"}) if isinstance(m, LlmModelSpec) else m for m in models]
        llms = [m for m in models if isinstance(m, LlmModelSpec)]
    copies = [m.model_copy(update={"name": f"{m.name}-copy", "artifact": f"org/{m.name}-copy", "revision": "f" * 40})
              for m in llms]
    own = [c.model_copy(update={"team": "another-team"}) for c in copies]
    assert all(search_key(c) == search_key(m) for c, m in zip(copies, llms))
    assert all(search_key(o) != search_key(m) for o, m in zip(own, llms))
    assert _plan_data(FleetSpec(models=[*models, *copies]), env, catalogue) == \
        _plan_data(FleetSpec(models=[*models, *own]), env, catalogue)
