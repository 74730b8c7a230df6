"""A layout of an LLM on the way through the planner: sized for memory, then timed against the SLA."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from ..hardware.instances import InstanceType
from .speed.load import Fit
from .speed.performance import LlmShape
from .precision import Precision
from ..rejection import Rejection


@dataclass(kw_only=True, frozen=True)
class Sized:
    """A layout whose memory fits, waiting to be timed: ``floor_usd`` is its cost at the replica floor."""

    instance: InstanceType
    tp: int
    pp: int
    expert_parallel: bool
    precision: Precision
    shape: LlmShape
    kv_seqs: int  # sequences of the average context its KV cache holds
    kv_tokens: int
    kv_gib: float  # per replica, all GPUs
    lora_gib: float  # per GPU
    floor_usd: float
    bound: str = "at its replica floor"  # what floor_usd is: the floor's cost, or the replicas it would need


    @property
    def label(self) -> str:
        return f"{self.instance.name} tp={self.tp} pp={self.pp}" + (" ep" if self.expert_parallel else "")


@dataclass(kw_only=True, frozen=True)
class LlmCandidate:
    sized: Sized
    fit: Fit
    min_replicas: int
    nodes: int
    usd_per_hour: float
    source: str

    instance = property(lambda self: self.sized.instance)
    tp = property(lambda self: self.sized.tp)
    pp = property(lambda self: self.sized.pp)
    expert_parallel = property(lambda self: self.sized.expert_parallel)
    precision = property(lambda self: self.sized.precision)
    replicas = property(lambda self: self.fit.replicas)
    max_num_seqs = property(lambda self: self.fit.max_num_seqs)
    label = property(lambda self: self.sized.label)


# What a layout came to: a priced candidate, why it cannot serve, or a Sized left untimed (its floor alone cost
# more than the best candidate found).
Outcome = Union[LlmCandidate, Rejection, Sized]
