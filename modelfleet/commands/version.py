"""The installed modelfleet's version: the one ``modelfleet --version`` prints and ``init`` pins."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def installed_version() -> str:
    try:
        return version("modelfleet")
    except PackageNotFoundError:  # a source tree run without installing: pyproject.toml's version is unknown here
        return "0+unknown"
