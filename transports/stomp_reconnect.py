"""Failover for ``stomp://`` (``imqReconnectEnabled``): the reconnect half of the transport.

When stomp.py reports the socket closed (the broker went away, or missed heart-beats),
every delivery tag of that connection is dead: the broker redelivers whatever was
unacknowledged, so the transport drops its unacked/stash state instead of acking into a
connection that no longer exists. The core is told (``on_connection_interrupted``) and a
``jmspy-stomp-reconnect`` thread reconnects with :func:`jmspy.reconnect.retry_with_backoff`
-- never on stomp.py's receiver thread, which is the one that reported the drop and must
return for the old connection to wind down. It re-SUBSCRIBEs every consumer with its old
subscription id and headers, then calls ``on_connection_resumed``. Calls made meanwhile
wait on ``_settled``; once the attempts are exhausted they fail naming host:port
(CONNECTION_LOST). With reconnect off there is one CONNECTION_LOST and nothing else.

This lives apart from :mod:`.stomp` so that the steady-state path (subscribe, deliver,
ack, send) and the recovery path can be read, and changed, separately.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from jmspy import errors
from jmspy.reconnect import ReconnectPolicy, reconnect_in_background
from jmspy.transport import Credentials, TransportListener

if TYPE_CHECKING:
    from .stomp import _Sub

__all__ = ["StompFailover"]


class StompFailover:
    """Mixin of :class:`~jmspy.transports.stomp.StompTransport`: what happens when the
    connection drops. The attributes below are the transport's; declared for the type
    checker only."""

    host: str
    port: int
    version: str
    reconnect: ReconnectPolicy
    _conn: Any
    _closing: bool
    _lock: threading.RLock
    _settled: threading.Event
    _listener: TransportListener | None
    _lost: str | None
    _subs: dict[int, _Sub]
    _by_sid: dict[str, _Sub]
    _tag_owner: dict[int, _Sub]
    _tag_key: dict[int, str]
    _credentials: Credentials

    if TYPE_CHECKING:
        @property
        def where(self) -> str: ...

        def _try_connect(self, version: str, client_id: str | None, user: str | None,
                         password: str | None) -> bool: ...

        def _subscribe(self, sub: _Sub, *, same_id: bool = False, receipt: str = "") -> None: ...

        def close(self) -> None: ...

    def _on_disconnected(self) -> None:
        """stomp.py's receiver thread: the socket closed under us."""
        if self._conn is None or self._closing:
            return
        with self._lock:
            self._settled.clear()
            self._conn = None
            self._drop_deliveries()
        listener = self._listener
        if not self.reconnect.enabled:
            self._give_up("reconnecting is off (imqReconnectEnabled=False)")
            return
        if listener is not None:
            listener.on_connection_interrupted(errors.JMSException(
                f"lost the STOMP connection to {self.where}; reconnecting (unacknowledged "
                "messages will be redelivered by the broker)",
                error_code="CONNECTION_INTERRUPTED"))
        reconnect_in_background(self, f"jmspy-stomp-reconnect-{self.port}")

    def _drop_deliveries(self) -> None:
        # Lock held. Every tag of the dropped connection is dead; credit is gone with it.
        for sub in self._subs.values():
            sub.unacked.clear()
            sub.stash.clear()
            sub.pending_cancel.clear()
            sub.credit = 0
            sub.fence = False  # the broker redelivers everything after a reconnect
        self._tag_owner.clear()
        self._tag_key.clear()
        self._by_sid.clear()

    def _give_up(self, why: str) -> None:
        self._lost = (
            f"lost the STOMP connection to {self.where} ({why}); unacknowledged messages "
            "will be redelivered by the broker. Create a new connection once it is back"
        )
        self._settled.set()
        if self._listener is not None and not self._closing:
            self._listener.on_connection_interrupted(
                errors.JMSException(self._lost, error_code="CONNECTION_LOST"))

    # -- what jmspy.reconnect.reconnect_in_background drives (its own thread) ---------------
    def _reconnect_closing(self) -> bool:
        return self._closing

    def _reconnect_failed(self, why: str) -> None:
        self._give_up(why)

    def _reconnected(self) -> None:
        if self._closing:  # closed while we reconnected: do not leak the new socket
            self.close()
            return
        self._settled.set()
        if self._listener is not None:
            self._listener.on_connection_resumed()

    def _reconnect_once(self) -> None:
        c = self._credentials
        client_id, user, password = c.client_id, c.user, c.password
        self._try_connect(self.version, client_id, user, password)
        try:
            with self._lock:
                for sub in list(self._subs.values()):
                    self._subscribe(sub, same_id=True)
        except Exception as exc:  # dropped again while re-subscribing: try again
            with self._lock:
                self._conn = None
                self._drop_deliveries()
            raise errors.JMSException(f"re-subscribing failed: {exc}") from exc
