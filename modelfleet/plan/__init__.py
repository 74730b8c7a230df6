"""Stage 2, what the compiler decides: the instance catalogue (``instances.py``), sizing and numeric
precision (``sizing.py``, ``precision.py``), LLM layouts (``llm.py``, with ``llm_infeasible.py`` and
``rejection.py`` explaining what did not fit), Triton batching and queue policy (``triton_policy.py``),
packing classic models onto servers (``packing.py`` over ``binpacking.py``), each model's Triton plan
(``triton.py``), the engines' command lines the plan records (``engine_args.py``), what the pods write
to their nodes' disks and how fast (``disk.py``, ``node_volume.py``: each node group's root volume), the
whole fleet (``compiler.py``) and the plan types every later stage reads (``types.py``). Imports only ``spec``."""
