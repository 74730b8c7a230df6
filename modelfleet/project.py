"""Where a project's files live, and loading everything one environment needs (the CLI's and tests' edge)."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .cost.fleet import FleetCost
from .cost.policy import CostedPlan, compile_with_guardrails, cost_environment
from .deploy import Deployment
from .errors import CompileError, Issue, ModelfleetError, SpecError
from .plan.hardware.instances import InstanceCatalogue, load_instance_catalogue
from .plan.prewarm import llms_of, prewarm_simulations
from .plan.types import FleetPlan
from .render.fleet import render_fleet, render_triton_repositories
from .render.manifests import render_fleet_manifests, render_kubernetes
from .render.observability import DashboardBuilder
from .simcache import simulation_cache
from .spec.environment import EnvironmentSpec, list_stacks, load_environment, parse_environment, stack_path
from .spec.load import load_fleet_document, locate_issues, parse_fleet
from .spec.lock import StackLock, load_lock, lock_path
from .spec.models import FleetSpec
from .spec.yaml_source import Document, load_yaml, parse_path, parse_yaml

FleetSource = tuple[FleetSpec, Document]


@dataclass(frozen=True)
class Project:
    """A modelfleet project directory: models.yaml beside stacks/ (the Pulumi project's layout)."""

    root: str = "."
    models_file: str | None = None
    prices_file: str | None = None
    workers: int = 1  # processes that run the LLMs' simulations before a compile (plan/prewarm.py); 1: none
    cache_dir: str | None = None  # where simulations outlive the command (simcache.py); None: in memory only

    @property
    def models_path(self) -> str:
        return self.models_file or os.path.join(self.root, "models.yaml")

    @property
    def stacks_dir(self) -> str:
        return os.path.join(self.root, "stacks")

    def stacks(self) -> tuple[str, ...]:
        """The stack names; a project without any is refused (every command works per environment, and an
        empty list would give an empty cost report, a green PR comment that checked nothing)."""
        stacks = list_stacks(self.stacks_dir)
        if stacks:
            return stacks
        problem = "no stack file in it" if os.path.isdir(self.stacks_dir) else "no stacks directory"
        raise SpecError([Issue(self.stacks_dir, 0, 0, "", f"{problem}: each environment is a Pulumi stack file, "
                               "stacks/Pulumi.<env>.yaml beside models.yaml",
                               "create one (e.g. stacks/Pulumi.dev.yaml with `config: {aws:region: us-east-1}`), "
                               "or point --project at a project that has them")])

    def fleet(self) -> FleetSpec:
        return self.fleet_source()[0]

    def fleet_source(self) -> FleetSource:
        return load_fleet_document(self.models_path, self.stacks() or None)

    def fleet_from_text(self, text: str, label: str) -> FleetSource:
        """A catalogue given as text (e.g. the base branch's models.yaml); errors name ``label``."""
        doc = parse_yaml(text, label)
        return parse_fleet(doc, self.stacks() or None), doc

    def environment(self, stack: str) -> EnvironmentSpec:
        return load_environment(self.stacks_dir, stack, self.catalogue().families())

    @property
    def lock_path(self) -> str:
        return lock_path(self.models_path)

    def lock(self, stack: str) -> StackLock | None:
        """The stack's section of the placement lock beside models.yaml (None: no lock, or no section)."""
        lock = load_lock(self.models_path)
        return lock.stack(stack) if lock is not None else None

    def catalogue(self) -> InstanceCatalogue:
        return load_instance_catalogue(self.prices_file)

    def plan(self, stack: str) -> FleetPlan:
        """Compile one stack and enforce its policies and budget; errors are located at their lines."""
        return self.plan_and_cost(stack)[0]

    def plan_and_cost(self, stack: str, locked: bool = True,
                      source: FleetSource | None = None) -> tuple[FleetPlan, FleetCost]:
        """:meth:`plan` and what it costs (for ``plan --json`` and ``render``); ``locked=False`` ignores the
        placement lock (the global optimum: ``plan --repack``). ``source``: models.yaml as the caller has
        already loaded it (:meth:`fleet_source`), so a command that needs it again does not parse it twice."""
        fleet, doc = source or self.fleet_source()
        env = self.environment(stack)
        try:
            with self._simulations(fleet, env):
                return compile_with_guardrails(fleet, env, self.catalogue(), self.lock(stack) if locked else None)
        except CompileError as exc:
            raise self._locate(exc, doc, stack) from None

    def rendered(self, stack: str, dashboards: DashboardBuilder | None = None,
                 source: FleetSource | None = None) -> tuple[FleetPlan, dict[str, bytes]]:
        """The plan and every artifact of ``render``: plan.json with costs, Triton repositories, vLLM
        settings and the Kubernetes manifests that ``pulumi up`` applies (alert rules included; dashboards
        with a ``dashboards`` builder: modelfleet.grafana). ``source``: as for :meth:`plan_and_cost`."""
        plan, cost = self.plan_and_cost(stack, source=source)
        env = self.environment(stack)
        repositories = render_triton_repositories(plan)  # once: plan.json's tree and the manifests both carry them
        kubernetes = functools.partial(render_kubernetes, deploy=env.deploy, docs_url=env.observability.docs_url,
                                       dashboards=dashboards, cost=cost, repositories=repositories,
                                       dcgm_exporter=env.cluster.create, workers=self.workers)
        return plan, render_fleet(plan, extra=(kubernetes,), cost=cost, repositories=repositories)

    def environment_path(self, stack: str) -> str:
        return stack_path(self.stacks_dir, stack)

    def deployment(self, stack: str, config: dict[str, Any], dashboards: DashboardBuilder | None = None) -> Deployment:
        """What the Pulumi program deploys: the environment from the stack config Pulumi hands it (the
        same keys the CLI reads from the stack file), compiled with guardrails, rendered, and the
        Kubernetes objects grouped by workload (as objects: ``render`` writes the same ones as YAML)."""
        env = parse_environment(stack, config, families=self.catalogue().families())
        fleet, doc = self.fleet_source()
        try:
            with self._simulations(fleet, env):
                plan, cost = compile_with_guardrails(fleet, env, self.catalogue(), self.lock(stack))
        except CompileError as exc:
            raise self._locate(exc, doc, stack) from None
        files = render_fleet(plan, cost=cost)
        manifests = render_fleet_manifests(plan, env.deploy, files, docs_url=env.observability.docs_url,
                                           dashboards=dashboards, cost=cost, dcgm_exporter=env.cluster.create)
        return Deployment(env, plan, cost, files, manifests)

    def costed(self, stack: str, source: FleetSource | None = None) -> CostedPlan:
        """Compile and price one stack (of ``source``, default models.yaml) without enforcing guardrails."""
        fleet, doc = source or self.fleet_source()
        env = self.environment(stack)
        with self._simulations(fleet, env):
            return cost_environment(fleet, doc, env, self.catalogue(), self.lock(stack))

    @contextlib.contextmanager
    def _simulations(self, fleet: FleetSpec, env: EnvironmentSpec) -> Iterator[None]:
        """While a compile runs: the simulation memo backed by the disk cache (simcache.py), and the LLMs'
        simulations run in ``workers`` processes first (plan/prewarm.py). The same plan, sooner."""
        with simulation_cache(Path(self.cache_dir) if self.cache_dir else None):
            if self.workers > 1:
                prewarm_simulations(llms_of(fleet, env), env, self.catalogue(), self.workers)
            yield

    def _locate(self, error: ModelfleetError, doc: Document, stack: str) -> ModelfleetError:
        """Model issues at their models.yaml lines; stack-level ones (``config.*``) at the stack file's."""
        path = stack_path(self.stacks_dir, stack)
        stack_doc = load_yaml(path)
        issues = [stack_doc.issue(parse_path(i.path), i.message, i.fix) if i.path.startswith("config.") else i
                  for i in error.issues]
        return locate_issues(type(error)(issues), doc)
