"""The Pulumi program: stack config + models.yaml -> compile -> components -> exports.

Every decision is the compiler's (the same one `modelfleet plan/render` runs); components only create.
"""

import pulumi

from components.program import build_fleet, read_stack_config
from modelfleet.errors import ModelfleetError
from modelfleet.project import Project

project = Project(root=".")
stack = pulumi.get_stack()
try:
    env, plan, cost, files, manifests = project.deployment(stack, read_stack_config())
except ModelfleetError as error:
    raise pulumi.RunError("modelfleet could not compile models.yaml:\n" + "\n".join(map(str, error.issues))) from None

outputs = build_fleet(env, plan, files, manifests, pulumi.Config("modelfleet").get_secret("hfToken"))
pulumi.export("node_groups", {g.name: {"instance_type": g.instance_type, "min": g.min_size, "desired": g.desired_size,
                                       "max": g.max_size} for g in plan.node_groups})
pulumi.export("endpoints", outputs)
pulumi.export("monthly_cost_usd", round(cost.monthly_usd.desired, 2) if cost.monthly_usd else None)
