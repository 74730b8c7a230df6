"""The simulations' disk cache (modelfleet/simcache.py): a plan is byte-identical cold, warm and off; a warm
command runs no simulation; a damaged, colliding or foreign entry is a miss, never a figure."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from modelfleet.plan.llm.speed import peak
from modelfleet.plan.llm.speed.calibration import gpu_for
from modelfleet.plan.llm.speed.load import Speed
from modelfleet.plan.llm.speed.peak import SIMULATIONS, Traffic
from modelfleet.plan.llm.speed.performance import Layout, shape_from_fields
from modelfleet.plan.llm.speed.workload import Lengths
from modelfleet.project import Project
from modelfleet.render.fleet import plan_document, to_json
from modelfleet.simcache import DiskStore, cache_root, code_digest, simulation_cache
from modelfleet.spec.presets import LLM_PRESETS

from tests.conftest import ROOT
from tests.plan.test_prewarm import forget


@pytest.fixture
def cold():
    saved = dict(SIMULATIONS.entries)
    forget()
    yield
    SIMULATIONS.cache_clear()
    SIMULATIONS.entries.update(saved)


def _plan(project: Project, stack: str) -> bytes:
    forget()
    plan, cost = project.plan_and_cost(stack)
    return to_json(plan_document(plan, cost))


def _simulate(seed: int = 7):
    gpu = gpu_for(Project(str(ROOT)).catalogue().instances["g6e.xlarge"].gpu)
    speed = Speed(gpu, shape_from_fields(LLM_PRESETS["llama-3.1-8b"].fields), Layout(1, 1, False), 512, 128, None)
    traffic = Traffic(arrivals="poisson", rate_per_s=2.0, input=Lengths(mean=512.0), output=Lengths(mean=128.0))
    key = peak.simulation_key(speed, traffic, 64, 2048, 200_000, 1, seed, 200)
    return key, peak.simulated(speed, traffic, 64, 2048, 200_000, 1, 1000.0, None, seed=seed, requests=200)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_a_plan_is_the_same_cold_warm_and_off_and_warm_runs_no_simulation(tmp_path, cold, stack, monkeypatch):
    off = Project(str(ROOT))
    cached = Project(str(ROOT), cache_dir=str(tmp_path), workers=2)
    expected = _plan(off, stack)
    assert _plan(cached, stack) == expected  # cold: workers fill the disk
    stored = list(tmp_path.rglob("*.json"))
    assert stored
    ran = []
    original = peak.simulate
    monkeypatch.setattr(peak, "simulate", lambda **kw: ran.append(1) or original(**kw))
    assert _plan(Project(str(ROOT), cache_dir=str(tmp_path)), stack) == expected  # warm, one process
    assert ran == []
    assert sorted(tmp_path.rglob("*.json")) == sorted(stored)


def test_entries_are_read_back_equal_and_keyed_by_their_whole_key(tmp_path, cold):
    key, result = _simulate()
    store = DiskStore(tmp_path)
    store.put(key, result)
    assert store.get(key, "missing") == result
    other_key, _ = _simulate(seed=8)
    assert store.get(other_key, "missing") == "missing"
    store.put(other_key, None)  # an overloaded run is remembered as one
    assert store.get(other_key, "missing") is None


@pytest.mark.parametrize("damage", ["truncated", "not json", "other key", "extra field", "nan", "text figure"])
def test_a_damaged_entry_is_a_miss(tmp_path, cold, damage):
    key, result = _simulate()
    store = DiskStore(tmp_path)
    store.put(key, result)
    (path,) = tmp_path.rglob("*.json")
    document = json.loads(path.read_text())
    text = {
        "truncated": path.read_text()[:40],
        "not json": "\x00\x01",
        "other key": json.dumps({**document, "key": document["key"] + " "}),
        "extra field": json.dumps({**document, "result": {**document["result"], "spare": 1.0}}),
        "nan": json.dumps({**document, "result": {**document["result"], "ttft_p99_ms": float("nan")}}),
        "text figure": json.dumps({**document, "result": {**document["result"], "ttft_p99_ms": "12"}}),
    }[damage]
    path.write_text(text)
    assert store.get(key, "missing") == "missing"
    with simulation_cache(tmp_path):  # and the planner simulates instead of trusting it
        SIMULATIONS.cache_clear()
        assert _simulate()[1] == result


def test_a_new_simulator_reads_none_of_the_old_entries_and_removes_them(tmp_path, cold):
    key, result = _simulate()
    old = DiskStore(tmp_path, digest="0" * 64)
    old.put(key, result)
    current = DiskStore(tmp_path)
    assert current.get(key, "missing") == "missing"
    (tmp_path / "unrelated").mkdir()
    current.prune()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["unrelated"]
    assert current.version == f"simulations-{code_digest()[:16]}"


def test_the_version_follows_every_speed_source(tmp_path, monkeypatch):
    """Any file of plan/llm/speed/ changes the digest (the step time and the traffic as much as the simulator)."""
    speed = tmp_path / "speed"
    speed.mkdir()
    for name in ("simulation.py", "performance.py", "workload.py"):
        (speed / name).write_text(f"# {name}\n")
    monkeypatch.setattr("modelfleet.simcache.SPEED_SOURCES", speed)
    before = code_digest()
    (speed / "performance.py").write_text("# performance.py, edited\n")
    assert code_digest() != before


def test_a_cache_that_cannot_be_written_plans_all_the_same(tmp_path, cold):
    """The cache's directory is a file (as good as read-only, for root too): every write fails, the plan does not."""
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    assert _plan(Project(str(ROOT), cache_dir=str(blocked)), "prod") == _plan(Project(str(ROOT)), "prod")
    assert [p.name for p in tmp_path.iterdir()] == ["not-a-directory"]


def test_an_unwritable_cache_is_skipped_and_leaves_no_temporary_file(tmp_path, cold):
    blocker = tmp_path / "simulations-file"
    key, result = _simulate()
    store = DiskStore(tmp_path)
    store.directory = blocker  # a file where the directory should be: every write fails
    blocker.write_text("")
    store.put(key, result)
    assert not store.writable
    assert [p.name for p in tmp_path.iterdir()] == ["simulations-file"]


@pytest.mark.parametrize("environ, expected", [
    ({}, Path.home() / ".cache" / "modelfleet"),
    ({"XDG_CACHE_HOME": "/x"}, Path("/x/modelfleet")),
    ({"MODELFLEET_CACHE_DIR": "/y", "XDG_CACHE_HOME": "/x"}, Path("/y")),
    ({"MODELFLEET_CACHE": "off", "MODELFLEET_CACHE_DIR": "/y"}, None),
    ({"MODELFLEET_CACHE": "0"}, None),
])
def test_where_the_cache_lives(environ, expected):
    assert cache_root(environ) == expected


def test_the_cli_plan_uses_the_cache_and_prints_the_same(tmp_path):
    """Two real `modelfleet plan` runs: the second reads every simulation from the first's cache."""
    env = {**os.environ, "MODELFLEET_CACHE_DIR": str(tmp_path)}
    command = [sys.executable, "-m", "modelfleet", "--project", str(ROOT), "plan", "--stack", "prod"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    entries = sorted(tmp_path.rglob("*.json"))
    second = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    assert second.stdout == first.stdout and entries
    assert sorted(tmp_path.rglob("*.json")) == entries
    off = subprocess.run(command, env={**env, "MODELFLEET_CACHE": "off"}, capture_output=True, text=True, check=True)
    assert off.stdout == first.stdout
