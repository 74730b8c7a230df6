"""session-recommender: a shopping session's running profile (Triton python backend, sequence batcher).

The example fleet's stateful model (models.yaml ``stateful:``), served as is by ``modelfleet serve``. Each
request of a session (one sequence id) carries the embedding of the item just viewed; the answer is the
session's profile so far (the mean of every item embedding of the session) and how many events it holds.
The state lives in this instance, keyed by the sequence id: the sequence batcher's ``direct`` strategy sends
every request of a sequence to the same instance.

The control inputs are the compiled ones (plan/triton/sequences.py): START (1 on a session's first request: its
state starts afresh), END (1 on its last: its state is dropped), READY (1 for the batch rows that hold a
request; a direct batch carries every slot of the instance) and CORRID (the session id).

Idle sessions: Triton releases a sequence idle for ``max_sequence_idle_microseconds`` (its next request must
START again) but does not tell the model, so the model drops the state of a session it has not seen for as
long, at the next execution. Cancelled requests are answered CANCELLED without work.
"""

import json
import time

import numpy as np

try:
    import triton_python_backend_utils as pb_utils
except ImportError:  # imported outside Triton (to read the logic); execute() needs it
    pb_utils = None


class Sessions:
    """Running sums per session id, and when each was last seen (monotonic seconds)."""

    def __init__(self, idle_s):
        self.idle_s = idle_s
        self.sums, self.counts, self.seen = {}, {}, {}

    def observe(self, session, embedding, start, end, now):
        """Add one item to ``session`` (started afresh when ``start``); its (profile, events)."""
        if start or session not in self.sums:
            self.sums[session], self.counts[session] = np.zeros_like(embedding), 0
        self.sums[session] = self.sums[session] + embedding
        self.counts[session] += 1
        self.seen[session] = now
        profile, events = self.sums[session] / self.counts[session], self.counts[session]
        if end:
            self.forget(session)
        return profile.astype(np.float32), events

    def forget(self, session):
        for table in (self.sums, self.counts, self.seen):
            table.pop(session, None)

    def expire(self, now):
        """Drop sessions idle longer than Triton keeps their slot (it has released them)."""
        for session in [s for s, seen in self.seen.items() if now - seen > self.idle_s]:
            self.forget(session)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        idle_us = int(config["sequence_batching"]["max_sequence_idle_microseconds"])
        self.sessions = Sessions(idle_us / 1e6)

    def execute(self, requests):
        now = time.monotonic()
        self.sessions.expire(now)
        return [self._answer(request, now) for request in requests]

    def _answer(self, request, now):
        if request.is_cancelled():
            return pb_utils.InferenceResponse(
                error=pb_utils.TritonError("request cancelled", pb_utils.TritonError.CANCELLED))
        read = lambda name: pb_utils.get_input_tensor_by_name(request, name).as_numpy()  # noqa: E731
        embedding = read("item_embedding").reshape(-1, 16)[0].astype(np.float64)
        if not int(read("READY").reshape(-1)[0]):  # an empty slot of a direct batch: nothing to do
            return pb_utils.InferenceResponse([self._tensor("session_profile", np.zeros(16, np.float32)),
                                               self._tensor("events", np.zeros(1, np.int32))])
        profile, events = self.sessions.observe(int(read("CORRID").reshape(-1)[0]), embedding,
                                                bool(read("START").reshape(-1)[0]), bool(read("END").reshape(-1)[0]),
                                                now)
        return pb_utils.InferenceResponse([self._tensor("session_profile", profile),
                                           self._tensor("events", np.array([events], np.int32))])

    @staticmethod
    def _tensor(name, value):
        return pb_utils.Tensor(name, value.reshape((1,) + value.shape))  # batch of one: max_batch_size > 0
