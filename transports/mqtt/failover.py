"""Failover for ``mqtt://`` (``imqReconnectEnabled``): what happens when the connection drops.

paho's own reconnect is off. When its network thread reports the connection gone
(``on_disconnect``, after CONNACK), every delivery tag of the connection is dead. The
core is told (``on_connection_interrupted``); with a client id the broker redelivers the
unacknowledged QoS 1 messages, DUP flag set, and without one the clean session and what
it held are gone, which the message says. A synchronous send waiting for its PUBACK
fails at once, and so does every asynchronous send in flight: the broker may or may not
have them, and only the application can decide.

Then a ``jmspy-mqtt-reconnect`` thread, driven by
:func:`jmspy.reconnect.reconnect_in_background` (the one reconnect loop of every
transport), connects a new client with the policy's backoff along the address list,
re-subscribes every subscription (the broker may have lost the session, e.g. Mosquitto
without persistence) and calls ``on_connection_resumed``. Never on paho's network
thread: it reported the drop and must return for the old client to wind down (its loop
is stopped first). Calls made meanwhile wait for the outcome; once the attempts are
exhausted they fail naming host:port (CONNECTION_LOST). With reconnect off there is one
CONNECTION_LOST and nothing else.
"""

from __future__ import annotations

from typing import Any, Protocol

from jmspy import errors
from jmspy.logs import transport_logger
from jmspy.reconnect import ReconnectPolicy, reconnect_in_background

from .. import failover_host

__all__ = ["Failover", "FailoverHost"]

log = transport_logger("mqtt")


class FailoverHost(failover_host.FailoverHost, Protocol):
    """The connection state :class:`Failover` steers; the transport owns it."""

    @property
    def port(self) -> int: ...

    @property
    def persistent_session(self) -> bool:
        """A client id was given: the broker keeps the session (and what it holds)."""

    def connection_dropped(self, reason: str) -> None:
        """Forget the dead connection, every delivery and every send in flight of it;
        calls wait from now on."""

    def connect_again(self, address: int) -> None:
        """CONNECT a new client (same version and credentials) to address ``address`` of
        the list and SUBSCRIBE every subscription again; on failure, forget the half-made
        client and raise."""

    def discard_client(self) -> None:
        """Closed while reconnecting: disconnect the new client rather than leak it."""


def _stop_loop(old: Any) -> None:
    """Stop a dropped paho client's network thread (it ends by itself: no auto-reconnect)."""
    try:
        old.loop_stop()
    except Exception:
        pass


class Failover:
    """The drop-and-reconnect policy of one transport (see the module docstring). It is
    also what :func:`~jmspy.reconnect.reconnect_in_background` drives."""

    __slots__ = ("_host",)

    def __init__(self, host: FailoverHost) -> None:
        self._host = host

    def connection_lost(self, client: Any, reason: str) -> None:
        """paho's network thread: ``client``'s connection dropped (``reason``: the
        broker's DISCONNECT reason, or what paho met)."""
        host = self._host
        log.debug("the MQTT connection to %s dropped: %s", host.where, reason)
        host.connection_dropped(reason)
        kept = (
            "the broker redelivers unacknowledged messages when this client id reconnects"
            if host.persistent_session
            else "the clean session and its unacknowledged messages are gone"
        )
        if not host.reconnect.enabled:
            self._give_up(f"{reason}; {kept}; reconnecting is off (imqReconnectEnabled=False)")
            return
        listener = host.listener
        if listener is not None:
            listener.on_connection_interrupted(errors.JMSException(
                f"lost the MQTT connection to {host.where} ({reason}); reconnecting ({kept})",
                error_code="CONNECTION_INTERRUPTED"))
        reconnect_in_background(
            self, f"jmspy-mqtt-reconnect-{host.port}", before=lambda: _stop_loop(client))

    def _give_up(self, why: str) -> None:
        host = self._host
        log.debug("giving up the MQTT connection to %s: %s", host.where, why)
        lost = (f"lost the MQTT connection to {host.where} ({why}). Create a new connection "
                "once the broker is back")
        failover_host.lost_for_good(host, lost)

    # -- what jmspy.reconnect.reconnect_in_background drives (its own thread) ---------------
    @property
    def reconnect(self) -> ReconnectPolicy:
        return self._host.reconnect

    def _reconnect_closing(self) -> bool:
        return self._host.closing

    def _reconnect_failed(self, why: str) -> None:
        self._give_up(why)

    def _reconnected(self) -> None:
        host = self._host
        if host.closing:  # closed while we reconnected: do not leak the new client
            host.discard_client()
            return
        failover_host.resumed(host)

    @property
    def _reconnect_addresses(self) -> int:
        return self._host.address_count

    def _reconnect_once(self, address: int) -> None:
        self._host.connect_again(address)
