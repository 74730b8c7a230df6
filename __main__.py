"""The Pulumi program: stack config + models.yaml -> compile -> components -> exports.

Every decision is the compiler's (the same one `modelfleet plan/render` runs); components only create.
MODELFLEET_MODELS / MODELFLEET_PRICES point at another catalogue or price table (`modelfleet preview` passes
its --models / --prices this way).
"""

import os

import pulumi

from components.program import build_fleet, read_stack_config
from modelfleet.environment import deployment_issues
from modelfleet.errors import ModelfleetError, SpecError
from modelfleet.project import Project

stack = pulumi.get_stack()
project = Project(root=".", models_file=os.environ.get("MODELFLEET_MODELS"), prices_file=os.environ.get("MODELFLEET_PRICES"))
try:
    deployment = project.deployment(stack, read_stack_config())
    if issues := deployment_issues(deployment.env, project.environment_path(stack)):
        raise SpecError(issues)
except ModelfleetError as error:  # every problem, located, and nothing created
    raise pulumi.RunError(f"modelfleet cannot deploy stack {stack}:\n" + "\n".join(map(str, error.issues))) from None

for name, value in build_fleet(deployment, pulumi.Config("modelfleet").get_secret("hfToken")).items():
    pulumi.export(name, value)
cost = deployment.cost.monthly_usd  # None when a price is unknown
pulumi.export("monthly_cost_usd", None if cost is None else {k: round(v, 2) for k, v in cost.model_dump().items()})
