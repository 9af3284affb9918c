"""Failover for ``stomp://`` (``imqReconnectEnabled``): what happens when the connection drops.

When stomp.py reports the socket closed (the broker went away, or missed heart-beats),
every delivery tag of that connection is dead: the broker redelivers whatever was
unacknowledged, so the transport drops its unacked/stash state instead of acking into a
connection that no longer exists. The core is told (``on_connection_interrupted``) and a
``jmspy-stomp-reconnect`` thread, driven by :func:`jmspy.reconnect.reconnect_in_background`
(the one reconnect loop of every transport), reconnects with the policy's backoff -- never
on stomp.py's receiver thread, which is the one that reported the drop and must return for
the old connection to wind down. It re-SUBSCRIBEs every consumer with its old subscription
id and headers, then calls ``on_connection_resumed``. Calls made meanwhile wait for the
outcome; once the attempts are exhausted they fail naming host:port (CONNECTION_LOST).
With reconnect off there is one CONNECTION_LOST and nothing else -- except after a send
refused for lack of space (producer flow control, ``send-fail-if-no-space``): STOMP ends
the session after any ERROR, but the broker is up, so the transport connects again at
once and says so (CONNECTION_INTERRUPTED, then CONNECTION_RESUMED).
"""

from __future__ import annotations

from typing import Protocol

from jmspy import errors
from jmspy.reconnect import ReconnectPolicy, reconnect_in_background

from .. import failover_host

__all__ = ["Failover", "FailoverHost"]

#: Reconnecting after a refusal for space (whatever ``imqReconnectEnabled`` says): a few
#: quick attempts, since the broker is up and only ended the session.
ONCE_ATTEMPTS = 3
ONCE_INTERVAL = 0.05


class FailoverHost(failover_host.FailoverHost, Protocol):
    """The connection state :class:`Failover` steers; the transport owns it."""

    @property
    def refused_for_space(self) -> bool:
        """The connection's last ERROR refused a send for lack of space (producer flow
        control with ``send-fail-if-no-space``): the broker closed only because STOMP
        ends a session after an ERROR."""

    @property
    def broker_error(self) -> str | None:
        """What the broker's last ERROR on this connection said (it closes after one), or
        None."""

    def connection_dropped(self) -> bool:
        """Forget the dead connection and every delivery of it; calls wait from now on.
        False when there was nothing to forget (closing, or already down)."""

    def connect_again(self, address: int | None = None) -> None:
        """CONNECT anew (same version and credentials) to address ``address`` of the list
        (None: the same broker) and re-SUBSCRIBE every consumer with its old id; on
        failure, forget the half-made connection again and raise."""

    def close(self) -> None: ...


class Failover:
    """The drop-and-reconnect policy of one transport (see the module docstring). It is
    also what :func:`~jmspy.reconnect.reconnect_in_background` drives."""

    __slots__ = ("_host", "_once", "_thread_name")

    def __init__(self, host: FailoverHost, thread_name: str) -> None:
        self._host = host
        self._thread_name = thread_name
        #: the policy of a reconnect made although reconnecting is off (see below)
        self._once: ReconnectPolicy | None = None

    def connection_lost(self) -> None:
        """stomp.py's receiver thread: the socket closed under us."""
        host = self._host
        if not host.connection_dropped():
            return
        listener = host.listener
        if not host.reconnect.enabled:
            if not host.refused_for_space:
                self._give_up("reconnecting is off (imqReconnectEnabled=False)")
                return
            # The broker refused a send for lack of space and closed only because STOMP
            # ends a session after an ERROR: the connection itself is fine, so it is
            # made again at once, whatever imqReconnectEnabled says (and said so).
            self._once = ReconnectPolicy(True, ONCE_ATTEMPTS, ONCE_INTERVAL)
            why = ("the broker refused a send for lack of space and closed the connection "
                   "(STOMP ends a session after an ERROR); reconnecting")
        else:
            why = "reconnecting"
        if listener is not None:
            listener.on_connection_interrupted(errors.JMSException(
                f"lost the STOMP connection to {host.where}; {why} (unacknowledged "
                "messages will be redelivered by the broker)",
                error_code="CONNECTION_INTERRUPTED"))
        reconnect_in_background(self, self._thread_name)

    def _give_up(self, why: str) -> None:
        host = self._host
        # After an ERROR the broker's reason is the news: a blocked receive(), the next
        # send or commit and the listener's CONNECTION_LOST all say it (once each).
        refused = host.broker_error
        after = "" if refused is None else f"the broker closed it after its ERROR: {refused}; "
        lost = (
            f"lost the STOMP connection to {host.where} ({after}{why}); unacknowledged "
            "messages will be redelivered by the broker. Create a new connection once it "
            "is back"
        )
        failover_host.lost_for_good(host, lost)

    # -- what jmspy.reconnect.reconnect_in_background drives (its own thread) ---------------
    @property
    def reconnect(self) -> ReconnectPolicy:
        return self._once or self._host.reconnect

    def _reconnect_closing(self) -> bool:
        return self._host.closing

    def _reconnect_failed(self, why: str) -> None:
        self._once = None
        self._give_up(why)

    def _reconnected(self) -> None:
        self._once = None
        host = self._host
        if host.closing:  # closed while we reconnected: do not leak the new socket
            host.close()
            return
        failover_host.resumed(host)

    @property
    def _reconnect_addresses(self) -> int:
        # after a refusal for space the broker is up: reconnect to it, not along the list
        return 1 if self._once is not None else self._host.address_count

    def _reconnect_once(self, address: int) -> None:
        self._host.connect_again(None if self._once is not None else address)
