"""The Pulumi program, packaged: a fleet repository's ``__main__.py`` is ``from modelfleet.program import run;
run()``, so ``pip install modelfleet[pulumi]`` is all a repository needs (``modelfleet init`` writes it).

An edge, with ``modelfleet.components`` the only code that imports pulumi to create resources: stack config +
models.yaml -> compile -> deploy plan -> components -> exports (``main.py``).
"""

from .main import run

__all__ = ["run"]
