"""GPU-specific artifacts (``built_for``, spec/built_for.py): the GPU they may be placed on and the Triton
release that serves them.

* Placement: a model built for one GPU model is packed only onto instance types with that GPU
  (:func:`wrong_gpu`, a Rejection in the packing, so the plan's decision lists every other type and why).
  The Triton models of a stack share one GPU instance type (plan/triton/classic.py), so two models built for
  different GPUs cannot both be served: an error at the second one's ``built_for.gpu``, as is a GPU the stack
  allows no instance type with.
* Image: a server holding a TensorRT plan runs the Triton release whose TensorRT matches the plan's
  (data/triton_tensorrt.yaml): the stack's image when it is that release, else the newest listed release
  that ships it. Plans of different TensorRT versions never share a server: the default pool is split by
  TensorRT version (``<pool>-trt10-7``); a declared pool holding two is an error.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

import yaml

from ...errors import Issue
from ...spec.built_for import BUILT_FOR_EXAMPLE, version_matches
from ...spec.environment import EnvironmentSpec
from ...spec.models import ClassicModelSpec
from ..hardware.instances import InstanceCatalogue, InstanceType
from ..rejection import Rejection

NGC_IMAGE = "nvcr.io/nvidia/tritonserver:{release}-py3"
RELEASE_TAG = re.compile(r"tritonserver:(\d{2}\.\d{2})-py3$")


@dataclass(frozen=True)
class TritonRelease:
    release: str  # the NGC container's YY.MM
    triton: str
    tensorrt: str


@functools.lru_cache(maxsize=1)
def tensorrt_releases() -> tuple[TritonRelease, ...]:
    """The table of data/triton_tensorrt.yaml, oldest first."""
    text = resources.files("modelfleet").joinpath("data/triton_tensorrt.yaml").read_text(encoding="utf-8")
    rows = yaml.safe_load(text)["releases"]
    return tuple(TritonRelease(release=k, triton=v["triton"], tensorrt=v["tensorrt"]) for k, v in sorted(rows.items()))


def release_for(tensorrt: str, stack_image: str) -> TritonRelease | None:
    """The release serving a plan built with ``tensorrt``: the stack image's when it matches, else the newest."""
    matching = [r for r in tensorrt_releases() if version_matches(tensorrt, r.tensorrt)]
    tag = RELEASE_TAG.search(stack_image)
    own = [r for r in matching if tag and r.release == tag.group(1)]
    return (own or matching[-1:] or [None])[0]


def image_for(tensorrt: str | None, stack_image: str) -> str:
    """The image of a server whose TensorRT plans were built with ``tensorrt`` (None: none holds one)."""
    release = None if tensorrt is None else release_for(tensorrt, stack_image)
    tag = RELEASE_TAG.search(stack_image)
    if release is None or (tag is not None and tag.group(1) == release.release):
        return stack_image
    return NGC_IMAGE.format(release=release.release)


def tensorrt_of(model: ClassicModelSpec) -> str | None:
    return model.built_for.tensorrt if model.built_for is not None else None


def pool_suffix(model: ClassicModelSpec) -> str:
    """The default pool's split by TensorRT version: ``-trt10-7`` (plans of two versions share no server)."""
    version = tensorrt_of(model)
    return "" if version is None else "-trt" + "-".join(version.split(".")[:2])


def wrong_gpu(models: list[ClassicModelSpec], instance: InstanceType) -> Rejection | None:
    """The first model (by name) whose artifact is built for another GPU than ``instance``'s."""
    wrong = sorted((m for m in models if m.built_for is not None and m.built_for.gpu != instance.gpu.key),
                   key=lambda m: m.name)
    if not wrong:
        return None
    model = wrong[0]
    return Rejection(instance.name, f"{model.name} is built for {model.built_for.gpu} (built_for.gpu) and would not "
                                    f"load on its {instance.gpu.name}")


def built_for_issues(classic: list[tuple[int, ClassicModelSpec]], env: EnvironmentSpec,
                     catalogue: InstanceCatalogue) -> list[Issue]:
    """What keeps GPU-specific artifacts from being served here, each at the field to change."""
    allowed = {i.gpu.key for i in catalogue.in_families(env.instance_families)}
    issues, first = [], None
    for index, model in classic:
        if model.built_for is None or model.device == "cpu":
            continue
        gpu = model.built_for.gpu
        if gpu not in allowed:
            families = sorted({i.family for i in catalogue.instances.values() if i.gpu.key == gpu})
            issues.append(Issue("", 0, 0, f"models[{index}].built_for.gpu", f"{model.name} is built for {gpu}, but "
                                f"stack {env.name} allows no instance type with one (modelfleet:instanceFamilies: "
                                f"{', '.join(env.instance_families)})", f"rebuild it on one of the allowed GPUs "
                                f"({', '.join(sorted(allowed)) or 'none'}), or allow {' or '.join(families) or 'a family with it'}"))
        elif first is not None and first[1].built_for.gpu != gpu:
            issues.append(Issue("", 0, 0, f"models[{index}].built_for.gpu", f"{model.name} is built for {gpu}, "
                                f"{first[1].name} (models[{first[0]}]) for {first[1].built_for.gpu}: a stack's Triton "
                                "models share one GPU instance type", f"rebuild one of them for the other's GPU"))
        first = first or (index, model)
    return issues + _tensorrt_issues(classic, env)


def _tensorrt_issues(classic: list[tuple[int, ClassicModelSpec]], env: EnvironmentSpec) -> list[Issue]:
    """A TensorRT version no known release ships; two versions in one declared pool."""
    issues, pools = [], {}
    shipped = ", ".join(f"{r.tensorrt} (tritonserver {r.release})" for r in tensorrt_releases())
    for index, model in classic:
        version = tensorrt_of(model)
        if version is None:
            continue
        if release_for(version, env.triton.image) is None:
            issues.append(Issue("", 0, 0, f"models[{index}].built_for.tensorrt", f"{model.name} is built with "
                                f"TensorRT {version}, which no Triton release modelfleet knows ships: {shipped}",
                                "rebuild the plan with one of these (trtexec inside that tritonserver release's NGC "
                                "container), or add the release that ships it to modelfleet/data/triton_tensorrt.yaml "
                                "with its source"))
        if model.pool is not None:
            other = pools.setdefault(model.pool, (index, model))
            if tensorrt_of(other[1]).split(".")[:2] != version.split(".")[:2]:
                issues.append(Issue("", 0, 0, f"models[{index}].pool", f"pool {model.pool} holds TensorRT plans of "
                                    f"{tensorrt_of(other[1])} ({other[1].name}) and {version} ({model.name}): a "
                                    "server runs one TensorRT release", "give them different pools, or rebuild one "
                                    f"with the other's TensorRT ({BUILT_FOR_EXAMPLE})"))
    return issues
