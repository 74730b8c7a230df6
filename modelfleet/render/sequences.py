"""``sequence_batching`` for a stateful model: the strategy, idle release and the four control inputs.

The model reads them as input tensors of these names (plan/triton/sequences.py): START and END are 1 on a
sequence's first and last request, READY is 1 for the batch rows that hold a request (a direct-strategy
batch carries every slot of its instance), CORRID is the sequence id the client sent (uint64).
"""

from __future__ import annotations

from tritonclient.grpc import model_config_pb2 as mc

from ..plan.types import SequencePlan

Kind = mc.ModelSequenceBatching.Control
FLAGS = (("START", Kind.CONTROL_SEQUENCE_START), ("END", Kind.CONTROL_SEQUENCE_END),
         ("READY", Kind.CONTROL_SEQUENCE_READY))


def sequence_batching(config: mc.ModelConfig, plan: SequencePlan) -> None:
    batching = config.sequence_batching
    batching.max_sequence_idle_microseconds = plan.idle_timeout_us
    for name, kind in FLAGS:
        batching.control_input.add(name=name).control.add(kind=kind, int32_false_true=[0, 1])
    batching.control_input.add(name="CORRID").control.add(kind=Kind.CONTROL_SEQUENCE_CORRID,
                                                          data_type=mc.TYPE_UINT64)
    if plan.strategy == "direct":
        batching.direct.max_queue_delay_microseconds = plan.max_queue_delay_us
    else:
        batching.oldest.max_candidate_sequences = plan.slots
        batching.oldest.max_queue_delay_microseconds = plan.max_queue_delay_us
