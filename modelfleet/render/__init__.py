"""Stage 4, the artifacts a plan becomes (pure: path -> bytes, or objects): Triton model configurations
through Triton's own protobuf schema (``triton.py``), the whole render tree with plan.json
(``fleet.py``), the Kubernetes objects (``k8s/``), the IAM policy documents (``iam.py``) and the
generated Python client (``client.py``); ``outputs.py`` is the one place that writes them to disk, all or
nothing. Imports only ``spec``, ``plan`` and ``cost``."""
