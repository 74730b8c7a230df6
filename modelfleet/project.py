"""Where a project's files live, and loading everything one environment needs (the CLI's and tests' edge)."""

from __future__ import annotations

import os
from dataclasses import dataclass

from .catalogue import load_fleet, load_fleet_document, locate_issues
from .errors import CompileError
from .compiler import compile_fleet
from .environment import EnvironmentSpec, list_stacks, load_environment
from .instances import InstanceCatalogue, load_instance_catalogue
from .plan import FleetPlan
from .spec import FleetSpec


@dataclass(frozen=True)
class Project:
    """A modelfleet project directory: models.yaml beside stacks/ (the Pulumi project's layout)."""

    root: str = "."
    models_file: str | None = None
    prices_file: str | None = None

    @property
    def models_path(self) -> str:
        return self.models_file or os.path.join(self.root, "models.yaml")

    @property
    def stacks_dir(self) -> str:
        return os.path.join(self.root, "stacks")

    def stacks(self) -> tuple[str, ...]:
        return list_stacks(self.stacks_dir)

    def fleet(self) -> FleetSpec:
        stacks = self.stacks()
        return load_fleet(self.models_path, stacks or None)

    def environment(self, stack: str) -> EnvironmentSpec:
        return load_environment(self.stacks_dir, stack)

    def catalogue(self) -> InstanceCatalogue:
        return load_instance_catalogue(self.prices_file)

    def plan(self, stack: str) -> FleetPlan:
        """Compile one stack; compile errors are located at the models.yaml lines they concern."""
        fleet, doc = load_fleet_document(self.models_path, self.stacks() or None)
        try:
            return compile_fleet(fleet, self.environment(stack), self.catalogue())
        except CompileError as exc:
            raise locate_issues(exc, doc) from None
