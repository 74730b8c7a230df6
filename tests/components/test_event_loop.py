"""A preview does not depend on what ran before it in the same process (issue 29: a different test order failed
8 tests and errored 7, because the SDK ran on whatever event loop the previous test had left)."""

from __future__ import annotations

import asyncio

import pytest

from tests.components.mocked import run


async def _nothing() -> None:
    return None


@pytest.mark.parametrize("left_behind", ["asyncio.run", "a closed loop", "no loop"])
def test_a_preview_runs_whatever_event_loop_state_it_finds(left_behind):
    if left_behind == "asyncio.run":
        asyncio.run(_nothing())  # closes its loop and leaves the thread with none
    elif left_behind == "a closed loop":
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        loop.close()
    else:
        asyncio.set_event_loop(None)
    result = run("dev")
    assert any(r.type == "aws:eks/nodeGroup:NodeGroup" for r in result.resources)
