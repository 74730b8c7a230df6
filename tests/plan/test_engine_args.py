"""The compiled tritonserver command lines: each flag once (a repeated flag is noise a reviewer must check)."""

from __future__ import annotations

import pytest

from tests.conftest import STACKS


@pytest.mark.parametrize("stack", STACKS)
def test_every_triton_server_flag_appears_once(plans, stack):
    for server in plans[stack].triton_servers:
        repeated = sorted({a for a in server.args if server.args.count(a) > 1})
        assert not repeated, (server.name, repeated)
        assert server.args.count("--metrics-config=summary_latencies=true") == 1, server.name
