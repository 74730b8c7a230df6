"""What each Triton model is warmed up with before it reports ready (render/warmup.py writes ``model_warmup``).

Why: the first requests to a fresh server pay for lazy initialisation (the backend's session and memory
arenas, the first execution of each batch shape): measured on the real tritonserver, the README's burst of
100 requests to a fresh ``modelfleet serve`` had 4 to 8 rejected by the compiled queue timeout, then none.
Triton runs ``model_warmup`` while loading the model, and with ``--strict-readiness`` the server is not ready
until every model has loaded, warmup included: so no client and no Service endpoint sees a cold model.

The warmup request is a representative one: the declared shape, each variable dimension (-1) at its declared
``typical_dims`` size or, undeclared, at ``TYPICAL_DIM``; sent at every power-of-two batch up to the largest the
dynamic batcher forms (its ``max_batch_size``), the shapes a server sees first at low and at peak load
(render/warmup.py). Its values are zeros, or the sample file models.yaml names for the input
(``warmup: {inputs: {NAME: FILE}}``, spec/warmup.py), shipped in the model repository.

A string input has no zero value a model's code accepts (zeros or random bytes are no valid image or text,
and a failed warmup fails the model's load): a model with one is warmed only when every string input has a
sample, and the plan asks for one otherwise. Ensembles are not warmed (Triton has no warmup for them; their
steps are warmed on their own).
"""

from __future__ import annotations

import base64

from ...spec.models import ClassicModelSpec
from ...spec.warmup import TYPICAL_DIM, sample_digest, typical_shape  # noqa: F401  (TYPICAL_DIM: part of this module's API)
from ..types import WarmupSamplePlan


def unwarmable(model: ClassicModelSpec) -> list[str]:
    """The string inputs without a sample: what keeps the model from being warmed."""
    return [t.name for t in model.inputs if t.dtype == "string"
            and (model.warmup is None or t.name not in model.warmup.inputs)]


def warmup_dims(model: ClassicModelSpec) -> tuple[tuple[int, ...], ...]:
    """Per input, the warmup request's dims without the batch dimension; () when the model is not warmed."""
    if unwarmable(model):
        return ()
    return tuple(typical_shape(tensor) for tensor in model.inputs)


def warmup_samples(model: ClassicModelSpec) -> tuple[WarmupSamplePlan, ...]:
    """The inputs warmed with their sample file, in input order (none when the model is not warmed)."""
    if model.warmup is None or unwarmable(model):
        return ()
    return tuple(WarmupSamplePlan(input=t.name, file=model.warmup.inputs[t.name],
                                  sha256=sample_digest(model.warmup.sample(t.name)),
                                  content_base64=base64.b64encode(model.warmup.sample(t.name)).decode())
                 for t in model.inputs if t.name in model.warmup.inputs)
