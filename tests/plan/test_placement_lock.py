"""The placement lock (#26): a change moves only the models it names, unless a model's own locked placement
became infeasible (and the plan says so). Checked on generated fleets and edits, on the plans themselves."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from modelfleet.errors import CompileError, SpecError
from modelfleet.plan.compiler import compile_fleet, models_in
from modelfleet.plan.lock import lock_of
from modelfleet.plan.types import FleetPlan, TritonModelPlan
from modelfleet.spec.lock import PlacementLock, dump_lock, parse_lock, with_stack
from modelfleet.spec.models import ClassicModelSpec, FleetSpec
from tests.cost.fleets import ENVIRONMENTS, fleets, models, summary

REPLACED = "re-placed despite the placement lock"


def placement(model) -> tuple:
    """Where a model runs: its server and instance type, or its LLM layout (replicas are not placement)."""
    if isinstance(model, TritonModelPlan):
        return model.server, model.instance_type
    return model.instance_type, model.tensor_parallel_size, model.pipeline_parallel_size, model.expert_parallel, \
        model.dtype


def compiled(models: list, env, catalogue, lock=None) -> FleetPlan | None:
    try:
        return compile_fleet(FleetSpec(models=tuple(models)), env, catalogue, lock)
    except CompileError:
        return None


def locked(plan: FleetPlan, models: list, env):
    specs = {m.name: m for _, m in models_in(FleetSpec(models=tuple(models)), env.name)}
    return lock_of(plan, specs)


def tightened(model):
    """The model with a tighter SLA: a classic p99 cut, an LLM's TTFT bound cut."""
    if isinstance(model, ClassicModelSpec):
        sla = model.sla.model_copy(update={"p99_latency_ms": max(5.0, model.sla.p99_latency_ms * 0.4)})
    else:
        sla = model.sla.model_copy(update={"p99_ttft_ms": model.sla.p99_ttft_ms * 0.25})
    return model.model_copy(update={"sla": sla})


def edited(base: list, edit: str, extra, which: int) -> tuple[list, str]:
    """The fleet after one pull request's edit, and the model it names."""
    if edit == "add":
        return base + [extra], extra.name
    k = which % len(base)
    if edit == "remove":
        return base[:k] + base[k + 1:], base[k].name
    return base[:k] + [tightened(base[k])] + base[k + 1:], base[k].name


def moved(before: FleetPlan, after: FleetPlan, named: str) -> list[str]:
    """Models the change did not name whose placement, or whose server's other members, changed, and that the
    plan does not say were re-placed."""
    said = {w.model for w in after.warnings if REPLACED in w.message}
    old = {m.name: m for m in before.models}
    out = []
    for model in after.models:
        if model.name == named or model.name not in old or model.name in said:
            continue
        if placement(model) != placement(old[model.name]):
            out.append(f"{model.name}: {placement(old[model.name])} -> {placement(model)}")
        elif isinstance(model, TritonModelPlan):
            mates = [set(before.server(model.server).models), set(after.server(model.server).models)]
            if mates[0] - {named} != mates[1] - {named} and not (mates[0] ^ mates[1]) & said:
                out.append(f"{model.name}: server {model.server} {sorted(mates[0])} -> {sorted(mates[1])}")
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=fleets(max_models=6), extra=models("added"), env=st.sampled_from(ENVIRONMENTS),
       edit=st.sampled_from(("add", "remove", "tighten")), which=st.integers(0, 10))
def test_a_change_moves_only_what_it_names(catalogue, base, extra, env, edit, which):
    before = compiled(base, env, catalogue)
    assume(before is not None)
    lock = locked(before, base, env)
    again = compiled(base, env, catalogue, lock)
    assert again is not None and [placement(m) for m in again.models] == [placement(m) for m in before.models]
    fleet, named = edited(base, edit, extra, which)
    assume(fleet)
    fresh = compiled(fleet, env, catalogue)
    assume(fresh is not None)  # a fleet no placement holds is an error with or without a lock
    after = compiled(fleet, env, catalogue, lock)
    context = f"{edit} {named} in {env.name}:\n" + "\n".join(map(summary, fleet))
    assert after is not None, "the locked compile fails where a fresh one succeeds: " + context
    assert moved(before, after, named) == [], context


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(base=fleets(max_models=6), extra=models("added"), env=st.sampled_from(ENVIRONMENTS))
def test_repacking_is_the_fleet_solved_without_the_lock(catalogue, base, extra, env):
    """Accepting a re-pack (``plan --repack --write-lock``) records today's optimum, and compiling against
    that lock keeps it."""
    before = compiled(base, env, catalogue)
    assume(before is not None)
    fleet = base + [extra]
    optimum = compiled(fleet, env, catalogue)
    assume(optimum is not None and compiled(fleet, env, catalogue, locked(before, base, env)) is not None)
    accepted = compiled(fleet, env, catalogue, locked(optimum, fleet, env))
    assert accepted is not None
    assert [placement(m) for m in accepted.models] == [placement(m) for m in optimum.models]
    assert [(s.name, s.models, s.replicas) for s in accepted.triton_servers] == [
        (s.name, s.models, s.replicas) for s in optimum.triton_servers]


def test_the_lock_round_trips_sorted(project):
    fleet = project.fleet()
    lock = None
    for stack in project.stacks():
        env = project.environment(stack)
        lock = with_stack(lock, stack, locked(compile_fleet(fleet, env, project.catalogue()), list(fleet.models), env))
    text = dump_lock(lock)
    assert parse_lock(text.decode(), "modelfleet.lock.yaml") == lock
    assert dump_lock(parse_lock(text.decode(), "x")) == text


# Strings a YAML 1.2 reader takes for numbers unless quoted (a digest is 16 hex digits: 573431241e710825 once
# failed every preview of a 1,000-model fleet, read back as 10^710825), and any other text.
NUMBER_LIKE = st.one_of(
    st.from_regex(r"\A[0-9]{1,16}(e[0-9]{1,15})?\Z"), st.from_regex(r"\A[-+.]?[0-9][0-9_.]*([eE][-+]?[0-9]+)?\Z"),
    st.text(min_size=1, max_size=20))


@settings(max_examples=200, deadline=None)
@given(digest=NUMBER_LIKE, name=NUMBER_LIKE)
def test_the_lock_reads_back_every_string_it_writes(digest, name):
    from modelfleet.spec.lock import ClassicLock, ServerLock, StackLock
    lock = PlacementLock(stacks={"dev": StackLock(
        classic={"m": ClassicLock(server=name, pool="p", node_group="g", instance_type="c7i.xlarge", digest=digest)},
        servers={"s": ServerLock(pool="p", instance_type="c7i.xlarge", models=(name, digest))})})
    assert parse_lock(dump_lock(lock).decode(), "modelfleet.lock.yaml") == lock


def test_a_digest_of_decimal_digits_and_one_e_stays_a_string():
    from modelfleet.spec.lock import ClassicLock, StackLock
    entry = ClassicLock(server="s", pool="p", node_group="g", instance_type="c7i.xlarge", digest="573431241e710825")
    text = dump_lock(PlacementLock(stacks={"dev": StackLock(classic={"m": entry})})).decode()
    assert "digest: '573431241e710825'" in text
    assert parse_lock(text, "x").stacks["dev"].classic["m"].digest == "573431241e710825"


def test_a_malformed_lock_is_a_located_error():
    text = "stacks:\n  dev:\n    classic:\n      a: {server: s, pool: p, node_group: g, instance_type: 3, digest: d}\n"
    with pytest.raises(SpecError) as raised:
        parse_lock(text, "modelfleet.lock.yaml")
    (issue,) = raised.value.issues
    assert (issue.file, issue.line) == ("modelfleet.lock.yaml", 4)
    assert "stacks.dev.classic.a.instance_type" in issue.path and "--write-lock" in issue.fix
    assert parse_lock("", "x") == PlacementLock()


TWO_MODELS = """models:
  - {name: big, type: vision, framework: onnx, artifact: s3://bucket/big, size: {memory_gib: 30},
     inputs: [{name: x, dtype: fp32, dims: [16]}], outputs: [{name: y, dtype: fp32, dims: [1]}],
     sla: {p99_latency_ms: 100, peak_rps: 10}}
  - {name: small, type: vision, framework: onnx, artifact: s3://bucket/small, size: {memory_gib: 1},
     inputs: [{name: x, dtype: fp32, dims: [16]}], outputs: [{name: y, dtype: fp32, dims: [1]}],
     sla: {p99_latency_ms: 100, peak_rps: 10}}
"""
STACK = "config:\n  aws:region: us-east-1\n  modelfleet:instanceFamilies: [g5, g6, g6e]\n"


def test_repack_is_priced_named_in_the_cost_comment_and_accepting_it_gives_the_optimum(tmp_path, capsys):
    """A 30 GiB model puts both models on an L40S; once it is removed, the lock keeps the small one there.
    `plan --repack` prices the move, the PR cost comment names it (over placement.repackSavingPercent), and
    `--repack --write-lock` records the plan a compile without the lock makes."""
    from modelfleet.cli import main
    from tests.cost.test_diff import git

    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.dev.yaml").write_text(STACK)
    (tmp_path / "models.yaml").write_text(TWO_MODELS)
    project = ["--project", str(tmp_path)]
    assert main([*project, "plan", "--stack", "dev", "--write-lock"]) == 0
    assert "instance_type: g6e." in (tmp_path / "modelfleet.lock.yaml").read_text()
    git(tmp_path, "init", "-q", "-b", "main")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "base")
    (tmp_path / "models.yaml").write_text("models:\n" + TWO_MODELS[TWO_MODELS.index("  - {name: small"):])
    capsys.readouterr()
    assert main([*project, "plan", "--stack", "dev", "--json"]) == 0
    locked = capsys.readouterr().out
    assert "\"instance_type\": \"g6e." in locked
    assert main([*project, "plan", "--stack", "dev", "--repack", "--json"]) == 0
    optimum, said = capsys.readouterr()
    assert "\"instance_type\": \"g6e." not in optimum
    assert "repack: locked" in said and "saves" in said and "--repack --write-lock" in said
    assert main([*project, "cost", "--base", "HEAD", "--stack", "dev"]) == 0
    assert "re-packing dev would save" in capsys.readouterr().out
    assert main([*project, "plan", "--stack", "dev", "--repack", "--write-lock", "--json"]) == 0
    capsys.readouterr()
    assert main([*project, "plan", "--stack", "dev", "--json"]) == 0
    assert capsys.readouterr().out == optimum


def test_preview_names_the_models_a_change_touches(catalogue):
    """A model that joins a locked server is named; its new neighbours are listed with the reason they roll."""
    from modelfleet.plan.lock import changed_models, touched_models
    from modelfleet.spec.load import parse_fleet_text

    env = ENVIRONMENTS[0]
    base = list(parse_fleet_text(TWO_MODELS).models)
    small = [m for m in base if m.name == "small"]
    joined = small + [small[0].model_copy(update={"name": "extra"})]
    before = compile_fleet(FleetSpec(models=tuple(small)), env, catalogue)
    after = compile_fleet(FleetSpec(models=tuple(joined)), env, catalogue, locked(before, small, env))
    named = changed_models(small, joined)
    assert named == {"extra"}
    (server,) = after.triton_servers
    assert touched_models(before, after, named) == (
        "models this change names: extra",
        f"small changes although this change does not name it: its server {server.name} rolls (extra joins it)")
