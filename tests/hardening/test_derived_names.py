"""Derived names (#23, classes 2 and 4): across fleets with adversarial names, every stack either renders
objects that are all distinct and all within the API server's and AWS's limits, with every planned workload
present (none silently overwritten), or is refused with located errors.

``MODELFLEET_NAME_EXAMPLES`` scales the run (default 60: each example compiles, renders and plans the deploy
of one stack, about a second)."""

from __future__ import annotations

import copy
import os
import tempfile
from collections import Counter
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from modelfleet.deploy import compile_deploy_plan
from modelfleet.errors import CompileError, SpecError
from modelfleet.project import Project
from tests.hardening.adversarial_names import (
    EXAMPLE,
    ROOT,
    STACKS,
    adversarial_fleets,
    deploy_problems,
    render_problems,
    stack_config,
)

EXAMPLES = int(os.environ.get("MODELFLEET_NAME_EXAMPLES", "60"))
MODELS_FILE = Path(tempfile.mkdtemp(prefix="modelfleet-names-")) / "models.yaml"


def _located(error: SpecError | CompileError) -> None:
    assert error.issues
    for issue in error.issues:
        assert issue.line >= 1 and issue.file.endswith((".yaml", ".yml")), f"not located: {issue}"


def outcome(text: str, stack: str) -> str:
    """"refused" (a located SpecError or CompileError) or "rendered" (render and deploy plan checked)."""
    MODELS_FILE.write_text(text)
    project = Project(root=str(ROOT), models_file=str(MODELS_FILE))
    try:
        project.fleet()
        plan, files = project.rendered(stack)
        deploy = compile_deploy_plan(project.deployment(stack, stack_config(stack)))
    except (SpecError, CompileError) as error:
        _located(error)
        return "refused"
    problems = render_problems(plan, files) + deploy_problems(plan, deploy)
    assert not problems, problems
    return "rendered"


def test_adversarial_names_render_distinct_objects_within_limits_or_are_refused():
    """Both outcomes must be reached (some fleets render, some are refused): counted in this one test, so that
    it holds whichever xdist worker runs it."""
    outcomes: Counter = Counter()

    @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(text=adversarial_fleets(), stack=st.sampled_from(STACKS))
    def check(text: str, stack: str) -> None:
        outcomes[outcome(text, stack)] += 1

    check()
    assert outcomes["rendered"] >= EXAMPLES // 10 and outcomes["refused"] >= EXAMPLES // 10, dict(outcomes)


@pytest.mark.parametrize(("name", "stack"), [
    ("triton-c7i-xlarge", "prod"),  # the fraud model's CPU server
    ("cluster", "dev"),  # the Namespace and device plugin's group
    ("llama-3-1-8b-instruct-stage", "prod"),  # the 8B's staging Job's service account
    ("llama-3-1-8b-instruct-canary", "staging"),  # the 8B's canary Service (staging has a gateway)
    ("modelfleet-fleet", "prod"),  # the fleet dashboard's ConfigMap
    ("x" * 63, "prod"),  # <name>-canary, <name>-dashboard... past 63
])
def test_the_reported_names_are_refused_with_their_line(name, stack):
    data = copy.deepcopy(EXAMPLE)
    llm = next(m for m in data["models"] if m["name"] == "llama-3-1-8b-instruct")
    data["models"].append({**copy.deepcopy(llm), "name": name})
    MODELS_FILE.write_text(yaml.safe_dump(data, sort_keys=False, width=10_000))
    project = Project(root=str(ROOT), models_file=str(MODELS_FILE))
    with pytest.raises((SpecError, CompileError)) as caught:
        project.rendered(stack)
    _located(caught.value)
    issue = next(i for i in caught.value.issues if i.path == f"models[{len(data['models']) - 1}].name")
    assert name in issue.message and issue.fix
