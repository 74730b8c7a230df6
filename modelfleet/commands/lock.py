"""Writing the placement lock (spec/lock.py) after ``plan --write-lock`` or ``render``, and pricing a re-pack.

The lock is written atomically (render/outputs.py's write_file): a reader sees the old lock or the new one,
never half of one. Only the stack planned is rewritten; the other stacks' sections are kept as they are.
"""

from __future__ import annotations

from ..cost.fleet import FleetCost
from ..plan.compiler import models_in
from ..plan.lock import lock_of
from ..plan.types import FleetPlan
from ..project import Project
from ..render.outputs import write_file
from ..spec.models import FleetSpec
from ..spec.lock import dump_lock, load_lock, with_stack


def write_stack_lock(project: Project, stack: str, plan: FleetPlan, fleet: FleetSpec) -> str:
    """Record ``plan``'s placement as ``stack``'s section of the lock beside models.yaml; its path (``fleet``:
    models.yaml as the plan was compiled from it)."""
    specs = {m.name: m for _, m in models_in(fleet, stack)}
    lock = with_stack(load_lock(project.models_path), stack, lock_of(plan, specs))
    write_file(project.lock_path, dump_lock(lock))
    return project.lock_path


def repack_saving(locked: FleetCost, optimal: FleetCost) -> tuple[float, float, float] | None:
    """(locked, optimal, saving) USD/month at desired replicas; None when a price is unknown."""
    if locked.monthly_usd is None or optimal.monthly_usd is None:
        return None
    before, after = locked.monthly_usd.desired, optimal.monthly_usd.desired
    return before, after, round(before - after, 2)
