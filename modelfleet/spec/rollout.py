"""How a workload ships a change: ``rollout: {strategy: canary, steps: [10, 50, 100], pause: 10m}``.

Written per model in models.yaml or per stack (``modelfleet:rollout``); a model's own wins. ``rolling`` (the
default) replaces pods as a Deployment does (the plan chooses surge or maxUnavailable, plan/capacity/rollout.py).
``canary`` runs the new pod template beside the old one under Argo Rollouts: at each step the canary takes
that percentage of the traffic for ``pause``, while an analysis built from the model's own SLA watches the
canary's pods; a failed analysis aborts the rollout and the stable pods take all traffic back.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, model_validator

from .tensors import LIST, Frozen
from .values import FieldProblem

DURATION = re.compile(r"^([1-9][0-9]{0,4})(s|m|h)$")
SECONDS = {"s": 1, "m": 60, "h": 3600}
MIN_PAUSE_S, MAX_PAUSE_S = 60, 24 * 3600  # an analysis needs a minute of data; a step longer than a day is a release
# The seed's practice (a 90/10 split, watched, then all of it), and long enough for a p99 to mean something.
DEFAULT_STEPS = (10, 100)
DEFAULT_PAUSE = "10m"


def duration_s(text: str) -> int:
    match = DURATION.match(text)
    assert match, text  # validated by RolloutSpec
    return int(match.group(1)) * SECONDS[match.group(2)]


class RolloutSpec(Frozen):
    """A rollout strategy: ``rolling`` (default) or ``canary`` with its steps and the pause at each."""

    strategy: Literal["rolling", "canary"] = "rolling"
    # Percentages of traffic on the new version, increasing, ending at 100; default: the seed's 90/10 split.
    steps: Annotated[tuple[Annotated[int, Field(strict=True, ge=1, le=100)], ...] | None, Field(
        **LIST, min_length=1, max_length=10,
        description="canary only: traffic percentages on the new version, increasing, ending at 100; "
                    "default [10, 100]")] = None
    pause: Annotated[str | None, Field(
        pattern=DURATION.pattern, description="canary only: how long each step is watched before the next, "
                                              "e.g. 10m, 90s, 1h; 1 minute to 24 hours; default 10m")] = None

    @model_validator(mode="after")
    def _consistent(self) -> RolloutSpec:
        if self.strategy == "rolling":
            extra = [k for k in ("steps", "pause") if getattr(self, k) is not None]
            if extra:
                raise FieldProblem((extra[0],), f"{extra[0]} applies to strategy: canary only",
                                   "write strategy: canary, or drop " + " and ".join(extra))
            return self
        steps = self.steps or DEFAULT_STEPS
        if any(b <= a for a, b in zip(steps, steps[1:])):
            raise FieldProblem(("steps",), f"steps must increase, got {list(steps)}", "e.g. [10, 50, 100]")
        if steps[-1] != 100:
            raise FieldProblem(("steps",), f"the last step is {steps[-1]}%: a canary ends with all the traffic",
                               f"append 100: {list(steps) + [100]}")
        if not MIN_PAUSE_S <= self.pause_s <= MAX_PAUSE_S:
            raise FieldProblem(("pause",), f"pause {self.pause} is outside 1m to 24h",
                               "an analysis needs at least a minute of data; use e.g. 10m")
        return self

    @property
    def canary_steps(self) -> tuple[int, ...]:
        return self.steps or DEFAULT_STEPS

    @property
    def pause_s(self) -> int:
        return duration_s(self.pause or DEFAULT_PAUSE)


ROLLING = RolloutSpec()
