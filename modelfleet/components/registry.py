"""Resources by dependency key: what a ``waits_for`` of the deploy plan resolves to."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import pulumi


class Registry:
    def __init__(self) -> None:
        self._resources: dict[str, list[pulumi.Resource]] = defaultdict(list)

    def add(self, key: str, *resources: pulumi.Resource) -> None:
        self._resources[key].extend(resources)

    def resolve(self, keys: Iterable[str]) -> list[pulumi.Resource]:
        """Every resource registered under ``keys``; a key nothing was registered under is a bug in the plan
        (it would silently drop an ordering), so it stops the program."""
        resolved = []
        for key in keys:
            if not self._resources.get(key):
                raise KeyError(f"nothing registered under dependency key {key!r}")
            resolved.extend(self._resources[key])
        return resolved
