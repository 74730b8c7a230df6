"""What each Triton model is warmed up with before it reports ready (render/warmup.py writes ``model_warmup``).

Why: the first requests to a fresh server pay for lazy initialisation (the backend's session and memory
arenas, the first execution of each batch shape): measured on the real tritonserver, the README's burst of
100 requests to a fresh ``modelfleet serve`` had 4 to 8 rejected by the compiled queue timeout, then none.
Triton runs ``model_warmup`` while loading the model, and with ``--strict-readiness`` the server is not ready
until every model has loaded, warmup included: so no client and no Service endpoint sees a cold model.

The warmup request is a representative one: the declared shape, each variable dimension (-1) at its declared
``typical_dims`` size or, undeclared, at ``TYPICAL_DIM``; sent at every power-of-two batch up to the largest the
dynamic batcher forms (its ``max_batch_size``), the shapes a server sees first at low and at peak load
(render/warmup.py).

Not warmed (plan warnings say so): a model with a string input (zeros or random bytes are no valid image or
text for its code, and a failed warmup fails the model's load), and ensembles and the vLLM backend (Triton
has no warmup for them; the steps of an ensemble are warmed on their own).
"""

from __future__ import annotations

from ...spec.models import ClassicModelSpec

# A variable dimension's size in a warmup request when its input declares no typical_dims: 16 is a short
# query's length in tokens, or a short clip's frames, the small end of what such inputs carry.
TYPICAL_DIM = 16


def warmup_dims(model: ClassicModelSpec) -> tuple[tuple[int, ...], ...]:
    """Per input, the warmup request's dims without the batch dimension; () when the model is not warmed."""
    if any(t.dtype == "string" for t in model.inputs):
        return ()
    out = []
    for tensor in model.inputs:
        typical = tensor.typical_dims or tuple(TYPICAL_DIM if d == -1 else d for d in tensor.dims)
        out.append(tuple(typical))
    return tuple(out)
