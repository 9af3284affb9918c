"""A STOMP session's common SEND, taken in one call.

A producer waiting for each RECEIPT waits for everything the broker does between reading
its SEND and writing the RECEIPT: that stretch is the broker's share of every round trip
(measured with ``python -m benchmarks.cpu_split``). Most SENDs are alike: a destination the
session has named before, a body, perhaps a receipt and application properties, nothing
else. :meth:`SessionRecord.send_common` takes exactly those and returns False for any
other, which the session's full path (``StompSession._dispatch`` -> ``_on_send`` ->
:func:`.mapping.to_server_message`) then handles: that path is the reference for every
step, and this one must do what it would, to the byte (tests/stomp_server/
test_send_common.py holds both to it). Its compiled twin (``cython_ext/stomp_send.pyx``)
was retired by the twin ledger's rule (benchmarks/README.md): with it pure,
``build_compare --over stomp`` ran 0.96x as fast end to end and 1.13x on the listener path.

:class:`SessionRecord` is the part of a :class:`~.protocol.StompSession` this path reads;
the session derives from it and sets every field in its ``__init__``, as
``ServerConnection`` derives from ``ConnectionRecord``. Behaviour stays the session's.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from jmspy import twins
from jmspy.broker_ref.core import BodyType, ServerMessage
from jmspy.stomp_frames import Frame
from jmspy.stomp_jms_header import HEADER as JMS_HEADER
from jmspy.wire.headers import LEASES_DESTINATION

from .held import HeldSend, HeldSends
from .mapping import _RESERVED, STATS_DESTINATION

if TYPE_CHECKING:
    from ...core import Broker, ServerConnection
    from .destinations import SessionDestinations

__all__ = ["SLOW_HEADERS", "SessionRecord"]

_codec = twins.stomp_codec

#: Headers that send a SEND down the full path: every reserved one but the three the
#: common SEND carries (destination, receipt, content-length), and the two that type its
#: properties. Anything else is an application property, kept as text.
SLOW_HEADERS: frozenset[str] = (
    _RESERVED - {"destination", "receipt", "content-length"}) | {"jmspy-ptypes", JMS_HEADER}


class SessionRecord:
    """The fields of a STOMP session that its common SEND reads (see the module
    docstring)."""

    __slots__ = ("_conn", "_destinations", "_held", "_id_prefix", "_msg_seq", "_out",
                 "broker", "closing", "version")

    broker: Broker
    version: str
    closing: bool
    _out: list[bytes]
    _conn: ServerConnection | None
    _destinations: SessionDestinations
    _held: HeldSends
    _id_prefix: str
    _msg_seq: itertools.count[int]

    def send_common(self, frame: Any, headers: dict[str, str], receipt: str | None) -> bool:
        """Handle the SEND ``frame`` (its ``headers`` as a dict, its ``receipt`` checked
        echoable) if it is a common one, and return True; else change nothing and return
        False. The caller knows the session is connected."""
        conn = self._conn
        if conn is None:
            return False
        props: dict[str, object] = {}  # the application properties, in one pass
        for name, text in headers.items():
            if name in SLOW_HEADERS:
                return False
            if name not in _RESERVED:
                props[name] = text
        dest = headers.get("destination")
        if dest is None or dest in (STATS_DESTINATION, LEASES_DESTINATION):
            return False
        target = self._destinations.cached(dest)
        if target is None:  # first use (parsed and remembered there), or a temp queue
            return False
        body: bytes = frame.body
        value: bytes | str
        if "content-length" in headers:
            body_type, value = BodyType.BYTES, body
        else:
            try:
                value = body.decode("utf-8")
            except UnicodeDecodeError:
                return False  # the full path refuses it, naming the rule
            body_type = BodyType.TEXT
        message_id = self._id_prefix + str(next(self._msg_seq))
        message = ServerMessage(
            message_id=message_id, kind=target.kind, destination=target.name,
            body_type=body_type, body=value, properties=props, persistent=False,
            priority=4, timestamp=self.broker.now(), expiration=0, deliver_at=0,
            correlation_id=None, reply_to=None, jms_type=None, size=len(body) + 64,
        )
        ticket = HeldSend(receipt, len(body))
        if not conn.send(message, None, ticket=ticket, timeout_ms=0):
            held = self._held
            held.parked(ticket)  # its RECEIPT waits for the core's send_done
            held.take_withheld()
            return True
        if receipt is not None and not self.closing:
            self._out.append(_codec.encode_frame(
                Frame("RECEIPT", [("receipt-id", receipt)]), self.version))
        return True
