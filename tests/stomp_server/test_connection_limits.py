"""No client can take the event loop from the others (issue 11, items 5 and 7), over real
loopback sockets: passwords are checked on the server's login thread, not the loop; failed
logins are throttled per (address, user name) and per address; a connection must complete
CONNECT within connect-timeout; connections are capped in total and per address, and what
is refused is counted in the broker's usage. Timing figures live in
benchmarks/security_attacks.py; these tests assert what happens, not how fast."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
from recording import login_threads
from stomp_support import RawClient, ServerHandle

from jmspy.broker_ref.core.security import SecurityPolicy
from jmspy.broker_ref.core.throttle import ThrottleSettings
from jmspy.broker_ref.protocols.stomp.server import ConnectionLimits


def _policy() -> SecurityPolicy:
    p = SecurityPolicy(iterations=1_000)
    p.add_user("alice", "alice-pw", roles=["r"])
    p.add_user("bob", "bob-pw", roles=["r"])
    p.add_permission("#", send=["r"], consume=["r"])
    return p


def _login(h: ServerHandle, user: str, password: str, source: str = "127.0.0.1") -> Any:
    """CONNECT from ``source`` (any 127.x address is loopback); the reply frame."""
    with RawClient(h.host, h.port, source) as raw:
        raw.send(f"CONNECT\naccept-version:1.2\nhost:/\nlogin:{user}\npasscode:{password}\n"
                 "\n\0".encode())
        return raw.read_frame()


def test_passwords_are_checked_on_the_login_thread_not_the_event_loop(
    server_factory: Callable[..., ServerHandle]
) -> None:
    policy = _policy()
    threads = login_threads(policy)
    h = server_factory(security=policy)
    assert _login(h, "alice", "alice-pw").command == "CONNECTED"
    assert _login(h, "alice", "wrong").command == "ERROR"
    assert len(threads) == 2 and all(t.startswith("jmspy-login") for t in threads)
    assert h.thread.name not in threads


def test_frames_sent_behind_connect_wait_for_the_login_and_are_then_served(
    server_factory: Callable[..., ServerHandle]
) -> None:
    h = server_factory(security=_policy())
    with RawClient(h.host, h.port) as c:
        c.send(b"CONNECT\naccept-version:1.2\nhost:/\nlogin:alice\npasscode:alice-pw\n\n\0"
               b"SUBSCRIBE\nid:s\ndestination:/queue/behind\n\n\0"
               b"SEND\ndestination:/queue/behind\nreceipt:r\n\npipelined\0")
        frames = [c.read_frame() for _ in range(3)]
        assert frames[0].command == "CONNECTED"
        assert {f.command for f in frames[1:]} == {"MESSAGE", "RECEIPT"}


def test_failed_logins_throttle_the_guessing_address_not_the_user_elsewhere(
    server_factory: Callable[..., ServerHandle], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    limits = ConnectionLimits(throttle=ThrottleSettings(delay_after=2, delay_ms=10,
                                                        refuse_after=3,
                                                        address_refuse_after=5))
    h = server_factory(security=_policy(), connection_limits=limits)
    for _ in range(3):
        assert "authentication failed" in _login(h, "alice", "guess").header("message")
    refused = _login(h, "alice", "alice-pw")  # the right password, but refused unchecked
    assert refused.command == "ERROR" and refused.header("message") == "too many failed logins"
    assert "try again in" in refused.body.decode()
    # alice's right password from another address logs in; so does bob from the guesser's
    assert _login(h, "alice", "alice-pw", source="127.0.0.2").command == "CONNECTED"
    assert _login(h, "bob", "bob-pw").command == "CONNECTED"
    # spraying other user names from the guessing address spends its own, higher budget
    assert "authentication failed" in _login(h, "carol", "guess").header("message")
    assert "authentication failed" in _login(h, "dave", "guess").header("message")
    sprayed = _login(h, "bob", "bob-pw")  # 5 failures from 127.0.0.1 across user names
    assert sprayed.header("message") == "too many failed logins"
    assert "login-address-refuse-after" in sprayed.body.decode()
    assert _login(h, "bob", "bob-pw", source="127.0.0.2").command == "CONNECTED"
    assert any("failed logins" in r.getMessage() for r in caplog.records)
    usage = h.call(h.broker.usage)
    assert usage["connectionsRefusedLoginThrottled"] == 2


def test_connect_must_complete_within_connect_timeout(
    server_factory: Callable[..., ServerHandle], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    h = server_factory(connection_limits=ConnectionLimits(connect_timeout=0.3))
    with RawClient(h.host, h.port) as good, RawClient(h.host, h.port) as trickle, \
            RawClient(h.host, h.port) as silent:
        assert good.connect().command == "CONNECTED"
        trickle.send(b"CONN")  # half a CONNECT, never finished
        error = trickle.read_frame()
        assert error.command == "ERROR" and error.header("message") == "CONNECT timeout"
        assert "[limits] connect-timeout" in error.body.decode()
        assert trickle.closed_by_server() and silent.closed_by_server()
        good.send(b"SEND\ndestination:/queue/q\nreceipt:r\n\nx\0")
        assert good.read_frame().command == "RECEIPT"  # connected clients stay
    assert sum("no CONNECT completed" in r.getMessage() for r in caplog.records) == 2


def test_connections_are_capped_in_total_and_per_address(
    server_factory: Callable[..., ServerHandle]
) -> None:
    h = server_factory(connection_limits=ConnectionLimits(max_connections=3,
                                                          max_connections_per_address=2))
    a1, a2 = RawClient(h.host, h.port), RawClient(h.host, h.port)
    assert a1.connect().command == "CONNECTED" and a2.connect().command == "CONNECTED"
    third = RawClient(h.host, h.port)  # a third from 127.0.0.1
    frame = third.read_frame()
    assert frame.command == "ERROR" and frame.header("message") == "too many connections"
    assert "max-connections-per-address" in frame.body.decode() and third.closed_by_server()
    other = RawClient(h.host, h.port, "127.0.0.2")
    assert other.connect().command == "CONNECTED"  # the total is 3 now
    fourth = RawClient(h.host, h.port, "127.0.0.3")
    refusal = fourth.read_frame()
    assert refusal.header("message") == "too many connections"
    assert "[limits] max-connections" in refusal.body.decode()
    usage = h.call(h.broker.usage)
    assert (usage["connectionsRefusedPerAddress"], usage["connectionsRefusedMaxConnections"],
            usage["connectionsRefused"]) == (1, 1, 2)
    for c in (a1, a2, third, other, fourth):
        c.close()

