"""Stage 2, what the compiler decides: ``compile_fleet`` (``compiler.py``) turns the specs into the plan types
every later stage reads (``types.py``). One sub-package per concern, each importing only those before it
(``tests/test_layering.py``): ``hardware/`` (instances, prices, kubelet), ``serving/`` (engine command lines),
``capacity/`` (node groups, fit, disks, rollout), ``llm/`` (layouts; ``llm/speed/`` the step model and the load
at peak), ``triton/`` (classic models; ``triton/packing/`` shared GPUs). Imports only ``spec``."""
