"""The one line a job prints when it lost another of its processes: retryable, and naming the option that
lengthens the wait when the wait is what ended it (a peer slow to come back on a loaded machine)."""

import torch.distributed

from trainrig.cli.entry import lost_peer_line
from trainrig.strategies.strategy_option import TIMEOUT_FLAG


def test_a_peer_that_timed_out_names_the_timeout_option_and_a_closed_connection_does_not():
    gloo_timeout = RuntimeError(
        "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 300000ms for recv operation"
    )
    store_timeout = torch.distributed.DistStoreError("wait timeout after 300000ms, keys: /default_pg/0//cpu/1")
    closed = RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [198.18.0.2]")
    for error in (gloo_timeout, store_timeout):
        line = lost_peer_line(error)
        assert line is not None and TIMEOUT_FLAG in line and line.endswith("a restart resumes"), line
    line = lost_peer_line(closed)
    assert line is not None and "Connection closed by peer" in line and TIMEOUT_FLAG not in line, line
    assert lost_peer_line(ValueError("not a peer")) is None
