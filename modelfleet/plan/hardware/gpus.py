"""The GPU registry: the instance table's ``gpus:`` is the one list of GPUs; every GPU key a models.yaml names
(a profile's ``measured_on``) is checked against the table in use, so adding a GPU is a data change."""

from __future__ import annotations

from collections.abc import Iterable

from ...errors import Issue
from ...spec.models import ClassicModelSpec, LlmModelSpec
from ...spec.profiles import CPU
from .instances import InstanceCatalogue


def unknown_gpu_issues(models: Iterable[tuple[int, ClassicModelSpec | LlmModelSpec]],
                       catalogue: InstanceCatalogue) -> list[Issue]:
    """A located issue for each GPU key that names no GPU of ``catalogue`` (nor ``cpu``)."""
    known = ", ".join(sorted(catalogue.gpus))
    issues = []
    for index, model in models:
        key = model.profile.measured_on
        if key is None or key == CPU or key in catalogue.gpus:
            continue
        issues.append(Issue("", 0, 0, f"models[{index}].profile.measured_on",
                            f"{key!r} is not a GPU of the instance table ({known}), nor cpu",
                            "name the GPU the figures were taken on by its key, or add the GPU to the instance table "
                            "(data/instances.yaml gpus:, or the --prices table)"))
    return issues
