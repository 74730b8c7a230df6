"""The LLMs' simulations run in parallel before the compile: each model's layout search in a forked worker,
its simulations handed back to this process's memo (llm/speed/peak.py ``SIMULATIONS``), so the compile that
follows finds them there instead of running them one after another.

Nothing here decides anything. A simulation is a pure function of its key (peak.simulation_key), so a memo
entry is the run itself, and the plan is byte-identical whatever the workers did: a worker that failed, or
searched under other reservations than the compile's own (which places LLMs one after another, each taking
the reserved nodes the others left), only leaves simulations for the compile to run itself. The lock's kept
layouts (compiler._locked_precision) are simulated by the compile. Forking needs the ``fork`` start method
(Linux, macOS); elsewhere, or with one worker or one LLM, this does nothing. Models that differ only in their
name, artifact or revision search once (``distinct_searches``).
"""

from __future__ import annotations

from ..spec.environment import EnvironmentSpec
from ..spec.models import FleetSpec, LlmModelSpec
from .compiler import models_in
from .forked import can_fork, forked_pool, shared
from .hardware.instances import InstanceCatalogue
from .llm.precision_choice import choose_precision, search_key
from .llm.speed.peak import SIMULATIONS, SimulationKey, result_values
from .llm.speed.simulation import SimulationResult

Found = list[tuple[SimulationKey, SimulationResult | None]]
Sent = list[tuple[SimulationKey, dict[str, float | int] | None]]  # results as peak.result_values


def prewarm_simulations(models: list[tuple[int, LlmModelSpec]], env: EnvironmentSpec, catalogue: InstanceCatalogue,
                        workers: int) -> int:
    """Run the layout searches of ``models`` (index in models.yaml, the model as it runs in ``env``) in up to
    ``workers`` forked processes, and keep their simulations in this process's memo: how many were added."""
    models = distinct_searches(models)
    workers = min(workers, len(models))
    if not can_fork(workers):
        return 0
    before = len(SIMULATIONS)
    with forked_pool((models, env, catalogue), workers) as pool:
        for sent in pool.imap_unordered(_search_at, range(len(models)), chunksize=1):
            SIMULATIONS.update([(key, None if values is None else SimulationResult(**values)) for key, values in sent])
    return len(SIMULATIONS) - before


def llms_of(fleet: FleetSpec, env: EnvironmentSpec) -> list[tuple[int, LlmModelSpec]]:
    """The LLMs of ``fleet`` as they run in ``env`` (compiler.models_in), with their models.yaml index."""
    return [(i, m) for i, m in models_in(fleet, env.name) if isinstance(m, LlmModelSpec)]


def distinct_searches(models: list[tuple[int, LlmModelSpec]]) -> list[tuple[int, LlmModelSpec]]:
    """``models`` less those whose search is another's: the same spec under another name, artifact or revision
    (which checkpoint, not its shape; the simulations are seeded from the traffic, not the name), which would
    run the same simulations in two workers, each missing the other's memo. The first of each in models.yaml's
    order is kept. Were a search to depend on what the key leaves out, the compile would run the simulations it
    misses itself: the plan is the same either way."""
    seen: set[str] = set()
    kept = []
    for index, model in models:
        key = search_key(model)
        if key not in seen:
            seen.add(key)
            kept.append((index, model))
    return kept


def _search_at(position: int) -> Sent:
    models, env, catalogue = shared()
    index, model = models[position]
    found: Found = []
    SIMULATIONS.recorded = found
    try:
        choose_precision(model, env, catalogue, index)
    except Exception:  # noqa: BLE001 - the compile runs this search again and reports what it raises
        pass
    finally:
        SIMULATIONS.recorded = None
    return [(key, None if result is None else result_values(result)) for key, result in found]
