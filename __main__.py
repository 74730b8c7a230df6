"""The Pulumi program: modelfleet's own (pip install modelfleet[pulumi]); models.yaml and stacks/ say what it
deploys."""

from modelfleet.program import run

run()
