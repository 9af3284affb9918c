"""A call failed by a broker's ERROR returns once the connection is known to be down, so
the application's next call fails with the same reason instead of writing into a socket
the broker already closed (seen under load: a transacted send after the failed commit
"succeeded")."""

from __future__ import annotations

from typing import Any

import pytest

from jmspy import JMSException
from jmspy.transports.stomp.receipts import Receipts


class _ClosingConn:
    """A stomp.py connection whose receiver thread sees the broker's close only after
    ``reads_before_close`` more looks at it (the ERROR came first, the end of the stream
    a moment later)."""

    def __init__(self, reads_before_close: int) -> None:
        self.left = reads_before_close
        self.connected = True

    def is_connected(self) -> bool:
        if self.left <= 0:
            self.connected = False
        self.left -= 1
        return self.connected


def test_a_request_an_unnamed_error_fails_returns_with_the_connection_seen_down() -> None:
    conn = _ClosingConn(reads_before_close=3)
    receipts = Receipts("127.0.0.1:61613", lambda: conn if conn.connected else None, {})

    def write(*_args: Any, headers: dict[str, str]) -> None:
        # the broker refuses an earlier frame and closes: an ERROR naming no receipt
        receipts.on_error({"message": "frame too large"}, "over max-frame-bytes")

    with pytest.raises(JMSException, match="over max-frame-bytes"):
        receipts.request(write, timeout=5.0)
    assert not conn.connected  # the next call meets the drop and its reason


def test_a_broker_that_keeps_the_connection_after_an_error_costs_one_bounded_wait(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("jmspy.transports.stomp.receipts.ERROR_CLOSE_WAIT", 0.05)
    conn = _ClosingConn(reads_before_close=10**9)  # ActiveMQ goes on after refusing
    receipts = Receipts("127.0.0.1:61613", lambda: conn, {})

    def write(*_args: Any, headers: dict[str, str]) -> None:
        receipts.on_error({"message": "refused"}, "not allowed")

    with pytest.raises(JMSException, match="not allowed"):
        receipts.request(write, timeout=5.0)
    assert conn.connected
