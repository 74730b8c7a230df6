"""Pipelines: every problem is located (file:line:col, path) with its fix; and the p99 budget split."""

from __future__ import annotations

import textwrap

import pytest

from modelfleet.errors import SpecError
from modelfleet.plan.hardware.instances import load_instance_catalogue
from modelfleet.plan.triton.pipelines import effective_spec, size_on, split_budget
from modelfleet.plan.triton.policy import size_classic
from modelfleet.spec.load import parse_fleet_text

MODEL = """\
  - name: {name}
    type: other
    framework: python
    artifact: s3://bucket/{name}
    size: {{memory_gib: 0.1}}
    inputs: [{{name: {input}, dtype: fp32, dims: [4]}}]
    outputs: [{{name: {output}, dtype: fp32, dims: [4]}}]
    sla: {{p99_latency_ms: {p99}, peak_rps: 10}}
    profile: {{rps_per_instance: 1000, compute_ms: {compute}, measured_on: a10g}}
"""
# line 1 "models:", pre on lines 2-10, cls on lines 11-19, then the pipeline from line 20
BASE = ("models:\n" + MODEL.format(name="pre", input="raw", output="images", p99=100, compute=2)
        + MODEL.format(name="cls", input="images", output="probs", p99=100, compute=6) + textwrap.dedent("""\
    pipelines:
      - name: chain
        inputs: [{name: raw, dtype: fp32, dims: [4]}]
        outputs: [{name: probs, dtype: fp32, dims: [4], from: cls.probs}]
        steps:
          - model: pre
            inputs: {raw: raw}
          - model: cls
            inputs: {images: pre.images}
        sla: {p99_latency_ms: 80, peak_rps: 50}
    """))


def edit(old: str, new: str) -> str:
    assert BASE.count(old) == 1, old
    return BASE.replace(old, new)


def issues_of(text: str):
    with pytest.raises(SpecError) as caught:
        parse_fleet_text(text, "models.yaml", known_environments=("dev", "prod"))
    return caught.value.issues


# (id, document, "line:col", path, words the message must hold, words the fix must hold); the position is the
# loader's usual one: the key of the offending field, or the start of the offending list item
CASES = [
    ("unknown-model", edit("  - model: cls", "  - model: clss"), "27:9", "pipelines[0].steps[1].model",
     "no model named 'clss'", "did you mean `cls`?"),
    ("unmapped-input", edit("inputs: {images: pre.images}", "inputs: {}"), "28:9", "pipelines[0].steps[1].inputs",
     "cls's input images is not mapped", "add `images: <pipeline input or step.output>`"),
    ("unknown-reference", edit("{images: pre.images}", "{images: pre.image}"), "28:18",
     "pipelines[0].steps[1].inputs.images", "'pre.image' is neither an input of the pipeline", "did you mean `pre.images`?"),
    ("dtype-mismatch", edit("    inputs: [{name: images, dtype: fp32", "    inputs: [{name: images, dtype: fp16"),
     "28:18", "pipelines[0].steps[1].inputs.images", "pre.images is fp32 [4], but cls's input images is fp16 [4]",
     "same dtype and dims"),
    ("dims-mismatch", edit("outputs: [{name: probs, dtype: fp32, dims: [4], from", "outputs: [{name: probs, dtype: fp32, "
                                                                                 "dims: [5], from"),
     "23:15", "pipelines[0].outputs[0]", "probs is declared fp32 [5], but cls.probs is fp32 [4]", "declare it as fp32 [4]"),
    ("cycle", edit("inputs: {raw: raw}", "inputs: {raw: cls.probs}"),
     "26:9", "pipelines[0].steps[0].inputs", "the steps form a cycle: pre -> cls -> pre",
     "feed the first step from the pipeline's inputs"),
    ("unused-input", edit("inputs: [{name: raw, dtype: fp32, dims: [4]}]\n    outputs: [{name: probs",
                          "inputs: [{name: raw, dtype: fp32, dims: [4]}, {name: extra, dtype: fp32, dims: [4]}]\n"
                          "    outputs: [{name: probs"),
     "22:51", "pipelines[0].inputs[1]", "pipeline input extra is read by no step", "map it to a step's input, or remove it"),
    ("unused-output", edit("outputs: [{name: images, dtype: fp32, dims: [4]}]",
                           "outputs: [{name: images, dtype: fp32, dims: [4]}, {name: thumb, dtype: fp32, dims: [4]}]"),
     "25:9", "pipelines[0].steps[0].model", "pre.thumb is used by no later step and is not an output of the pipeline",
     "from: pre.thumb"),
    ("different-pools", edit("    artifact: s3://bucket/pre\n", "    artifact: s3://bucket/pre\n    pool: vision\n"),
     "25:5", "pipelines[0].steps", "the steps are in different pools: cls (no pool), pre (vision)",
     "give the steps the same pool, or none"),
    ("different-devices", edit("    artifact: s3://bucket/pre\n", "    artifact: s3://bucket/pre\n    device: cpu\n"),
     "25:5", "pipelines[0].steps", "some steps are device: cpu and some are not", "set the same device on every step"),
    ("stateful-step", edit("    artifact: s3://bucket/cls\n", "    artifact: s3://bucket/cls\n"
                           "    stateful: {idle_timeout_ms: 1000, max_sequences: 4}\n"),
     "28:9", "pipelines[0].steps[1].model", "cls is stateful: an ensemble step answers each request once",
     "use a model without streaming or stateful"),
    ("priority-step", edit("    sla: {p99_latency_ms: 100, peak_rps: 10}\n    profile: {rps_per_instance: 1000, compute_ms: 6",
                           "    sla: {p99_latency_ms: 100, peak_rps: 10, priorities: {interactive: {share: 0.8}, "
                           "batch: {share: 0.2, p99_latency_ms: 2000}}}\n"
                           "    profile: {rps_per_instance: 1000, compute_ms: 6"),
     "27:9", "pipelines[0].steps[1].model", "cls has sla.priorities", "drop it from the model, or use another model"),
    ("step-disabled-in-a-stack", edit("    artifact: s3://bucket/cls\n", "    artifact: s3://bucket/cls\n"
                                      "    environments: {dev: {enabled: false}}\n"),
     "28:9", "pipelines[0].steps[1].model", "cls is disabled in stack dev, where the pipeline runs",
     "environments: {dev: {enabled: false}}"),
]


def test_the_base_document_is_valid():
    assert parse_fleet_text(BASE, "models.yaml", known_environments=("dev", "prod")).pipelines[0].name == "chain"


@pytest.mark.parametrize("case_id,text,position,path,message,fix", CASES, ids=[c[0] for c in CASES])
def test_pipeline_problems_are_located_with_their_fix(case_id, text, position, path, message, fix):
    matching = [i for i in issues_of(text) if i.path == path and message in i.message]
    assert matching, "\n".join(str(i) for i in issues_of(text))
    issue = matching[0]
    assert f"{issue.file}:{issue.line}:{issue.column}" == f"models.yaml:{position}", str(issue)
    assert fix in issue.fix, str(issue)
    assert str(issue).startswith(f"models.yaml:{position}: {path}: ")


def test_a_step_disabled_with_its_pipeline_is_fine():
    text = edit("    artifact: s3://bucket/cls\n", "    artifact: s3://bucket/cls\n    environments: {dev: {enabled: false}}\n")
    text += "    environments: {dev: {enabled: false}}\n"
    assert parse_fleet_text(text, "models.yaml", known_environments=("dev", "prod")).pipelines


# ------------------------------------------------------------------------------------------ the p99 split
def test_the_p99_is_split_in_proportion_to_compute_and_the_tighter_p99_wins():
    fleet = parse_fleet_text(BASE, "models.yaml")
    (pipeline,) = fleet.pipelines
    catalogue = load_instance_catalogue()
    gpu = catalogue.instances["g5.xlarge"].gpu
    models = {m.name: m for m in fleet.models}
    own = {n: size_classic(m, gpu, catalogue, 0.7) for n, m in models.items()}
    budgets = split_budget(pipeline, own)
    # shares sum to the pipeline's p99, each in proportion to a full batch's time
    assert sum(b.budget_ms for b in budgets) == pytest.approx(80, abs=0.1)
    total = own["pre"].compute_ms + own["cls"].compute_ms
    for b in budgets:
        assert b.budget_ms == pytest.approx(80 * own[b.model].compute_ms / total, abs=0.05)
    # each member carries its own 10 req/s plus the pipeline's 50; its p99 is min(own 100, its share)
    for name, model in models.items():
        served = effective_spec(model, [pipeline], {pipeline.name: budgets})
        share = next(b.budget_ms for b in budgets if b.model == name)
        assert served.sla.peak_rps == 60
        assert served.sla.p99_latency_ms == min(100, share) == share
    # a member whose own p99 is tighter than its share keeps its own
    loose = pipeline.model_copy(update={"sla": pipeline.sla.model_copy(update={"p99_latency_ms": 1000})})
    wide = split_budget(loose, own)
    assert all(effective_spec(m, [loose], {loose.name: wide}).sla.p99_latency_ms == 100 for m in models.values())
    # size_on re-sizes the steps at their shares: each step's worst case (timeout + 2 batches) fits its share
    sized = size_on(list(models.values()), [pipeline], gpu, catalogue, 0.7)
    for b in sized.budgets[pipeline.name]:
        s = sized.sizings[b.model]
        assert s.queue_timeout_us / 1000 + 2 * s.compute_ms <= b.budget_ms + 1e-6
