"""An edge: the offline ``preview``, the Pulumi program run under the SDK's mocks (``runner.py``) and what
it would create, printed (``format.py``). The only part of the package that imports pulumi (the project's
``components/`` and ``__main__.py`` are the program itself)."""
