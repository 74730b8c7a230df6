"""Stability of what `pulumi up` would create, as a property under the SDK's mocks: for any stack, any order
of models.yaml and an LLM added under any name and load, every resource the unchanged catalogue creates
keeps its name and every input; only the node group the new model joins may change, and only its sizes.

(Classic models are different by design: adding one may re-pack Triton servers, see docs/concepts/decisions.md, "Classic models
and packing"; tests/hardening/test_stability.py holds their server names to the same rule.)
"""

from __future__ import annotations

import copy
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from tests.components.mocked import copy_project, example_models, run
from modelfleet.spec.lock import LOCK_FILE
from tests.conftest import ROOT, STACKS

pytestmark = pytest.mark.slow  # the Pulumi program under mocks: the full tier

EXAMPLE = example_models()
NAMES = {m["name"] for m in EXAMPLE["models"]}
BASE = {}  # stack -> its resources' inputs, run once


def inputs(result) -> dict[tuple[str, str], dict]:
    return {(r.type, r.name): r.inputs for r in result.resources if r.type != "pulumi:pulumi:Stack"}


def base(stack: str) -> dict[tuple[str, str], dict]:
    if stack not in BASE:
        BASE[stack] = inputs(run(stack))
    return BASE[stack]


def with_llm(order: list[int], name: str, sequences: int) -> dict:
    models = copy.deepcopy(EXAMPLE)
    models["models"] = [models["models"][i] for i in order]
    template = next(m for m in EXAMPLE["models"] if m["name"] == "llama-3-1-8b-instruct")
    added = copy.deepcopy(template) | {"name": name}
    # a closed loop of `sequences` users in place of the template's Poisson rate and its declared traffic
    sla = {k: v for k, v in added["sla"].items() if not k.startswith("peak_") and k != "traffic"}
    added["sla"] = dict(sla, peak_concurrent_sequences=sequences)
    models["models"].append(added)
    return models


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stack=st.sampled_from(STACKS), order=st.permutations(range(len(EXAMPLE["models"]))),
       name=st.from_regex(r"[a-z][a-z0-9]{0,6}(-[a-z0-9]{1,6})?", fullmatch=True), sequences=st.integers(1, 64))
def test_any_order_and_an_added_llm_leave_every_existing_resource_as_it_was(stack, order, name, sequences):
    assume(name not in NAMES and not name.startswith(("triton", "gpu-", "cluster", "model-repository")))
    before = base(stack)
    with tempfile.TemporaryDirectory() as tmp:
        project = copy_project(Path(tmp), with_llm(order, name, sequences))
        # the repository's placement lock too, as the base run reads it: dev's locked placement is not its fresh
        # optimum at today's spot prices, and a copy without the lock would be re-placed afresh
        shutil.copy(ROOT / LOCK_FILE, project / LOCK_FILE)
        after = inputs(run(stack, project))
    assert set(before) <= set(after), sorted(set(before) - set(after))
    overview = ("kubernetes:core/v1:ConfigMap", "configmap-modelfleet-modelfleet-fleet-dashboard")  # lists every model
    changed = sorted(key for key in before if before[key] != after[key] and key != overview)
    assert all(kind == "aws:eks/nodeGroup:NodeGroup" for kind, _ in changed), changed
    for key in changed:  # the group the new model joined: more nodes, nothing else
        assert {k: v for k, v in before[key].items() if k != "scalingConfig"} == \
               {k: v for k, v in after[key].items() if k != "scalingConfig"}, key
    assert any(name in resource for _, resource in set(after) - set(before))
