"""Stage 1, what a person wrote: the models.yaml language (``models.py``, ``values.py``, ``presets.py``),
loading it with line-precise errors (``yaml_source.py``, ``load.py``, ``issues.py``), and the stack files'
``modelfleet:*`` keys (``environment.py``, ``stack_keys.py``). Imports nothing of the later stages."""
