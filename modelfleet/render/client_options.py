"""The per-request options of the generated client (render/client.py): priority class, sequence id and
flags, and streaming over gRPC. Kept apart so the client's core (tensors, checks, decoding) stays small.

Each option becomes a keyword argument of ``request(...)``, turned into ``Request.options``: the keyword
arguments of tritonclient's ``infer``/``async_stream_infer`` (``priority``, ``sequence_id``,
``sequence_start``, ``sequence_end``), so a caller passes them on with ``**request.options``.
"""

from __future__ import annotations

import textwrap

from ..plan.types import TritonModelPlan


def option_params(model: TritonModelPlan) -> str:
    """Keyword-only parameters of ``request`` for ``model``'s options ("" when it has none)."""
    params = []
    if model.priority_levels:
        default = next(lv.name for lv in model.priority_levels if lv.level == model.default_priority_level)
        params.append(f'priority: str = "{default}"')
    if model.sequence is not None:
        params += ["sequence_id: int", "start: bool = False", "end: bool = False"]
    return "".join(f",\n                {p}" for p in params)


def option_values(model: TritonModelPlan) -> str:
    """The ``Request.options`` expression built from those parameters."""
    items = []
    if model.priority_levels:
        items.append('"priority": cls.priorities[priority]')
    if model.sequence is not None:
        items += ['"sequence_id": sequence_id', '"sequence_start": start', '"sequence_end": end']
    return "\n                       {" + ", ".join(items) + "}" if items else "{}"


def option_doc(model: TritonModelPlan) -> str:
    """What the options mean, for the class docstring ("" when none)."""
    lines = []
    if model.priority_levels:
        names = ", ".join(f"{lv.name} (queue timeout {lv.queue_timeout_us} us)" for lv in model.priority_levels)
        lines.append(f"Priority classes, highest first: {names}; ``priority=`` picks one.")
    if model.sequence is not None:
        lines.append(f"Stateful: every request carries ``sequence_id``; ``start=True`` on a sequence's first request, "
                     f"``end=True`` on its last; a sequence idle {model.sequence.idle_timeout_us} us is released "
                     "(its next request must start it again).")
    if model.decoupled:
        lines.append("Streaming: several responses per request; use ``stream(grpc_client, request)`` (gRPC only).")
    return "".join("\n    " + "\n    ".join(textwrap.wrap(line, 110)) for line in lines)


def option_attributes(model: TritonModelPlan) -> str:
    """Class attributes the options need (the priority names' levels; whether it streams)."""
    out = ""
    if model.priority_levels:
        levels = ", ".join(f'"{lv.name}": {lv.level}' for lv in model.priority_levels)
        out += f"\n    priorities: ClassVar[dict[str, int]] = {{{levels}}}"
    return out + (f"\n    stateful: ClassVar[bool] = {model.sequence is not None}"
                  f"\n    streaming: ClassVar[bool] = {model.decoupled}")


STREAM_HELPER = '''

def stream(client: Any, request: Request, timeout_s: float = 60.0) -> list[Any]:
    """Every response of a streaming (decoupled) model to one request, in order, over ``client`` (a
    tritonclient.grpc client with no other stream open); ``decode`` each. Raises the server's error, or
    TimeoutError when no response came for ``timeout_s``."""
    import queue

    responses: queue.Queue = queue.Queue()
    options = dict(request.options)
    # a stream's headers (the caller's identity) are the stream's, set when it starts
    client.start_stream(callback=lambda result, error: responses.put((result, error)), headers=options.pop("headers", None))
    try:
        client.async_stream_infer(request.model_name, request.inputs, outputs=request.outputs,
                                  enable_empty_final_response=True, **options)
        out = []
        while True:
            try:
                result, error = responses.get(timeout=timeout_s)
            except queue.Empty:
                raise TimeoutError(f"{request.model_name}: no response for {timeout_s} s") from None
            if error is not None:
                raise error
            final = result.get_response().parameters["triton_final_response"].bool_param
            if result.get_response().outputs:
                out.append(result)
            if final:
                return out
    finally:
        client.stop_stream()
'''
