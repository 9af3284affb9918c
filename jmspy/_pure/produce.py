"""A plain ``MessageProducer.send(message)``: stamp the JMS headers, hand to the transport
(pure twin).

The compiled twin is ``cython_ext/produce.pyx`` (``jmspy._cext.produce``);
``tests/test_produce_twins.py`` runs both over the same random producers, sessions and
messages and requires the same headers, transport calls and hand-offs. Change one, change
the other.

Why a twin: every send runs this, and it was the send path's largest piece of
interpreted code on the caller's thread (two open checks, a message id, seven header
stores). :func:`send_plain` covers the send with no per-call overrides (no destination,
delivery mode, priority, time to live, delivery delay or completion listener) on an open
producer with a destination; anything else, including every error, is
``MessageProducer._send_full``'s, which stays the reference for what each step means.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jmspy.message import Message
    from jmspy.producer import MessageProducer

__all__ = ["send_plain"]

#: ``jmspy.message.Message``, imported on first use (this module is loaded while
#: ``jmspy.producer`` is being imported).
_Message: Any = None


def send_plain(producer: MessageProducer, message: Message) -> None:
    """``producer.send(message)`` without per-call overrides (see the module docstring).

    The same steps in the same order as ``MessageProducer._send_full``: the message id
    from the connection's sequence, the timestamp (wall clock, ms), the producer's
    destination, delivery mode and priority, the expiration and delivery time from its
    time to live and delivery delay, then the session's transport sends it in the
    session's transaction (None outside one).
    """
    global _Message
    if _Message is None:
        from jmspy.message import Message as _Message
    session = producer._session
    connection = session._connection
    target = producer.destination
    if (producer._closed or session._closed or session._closing or connection._closed
            or connection._closing or target is None or not isinstance(message, _Message)):
        producer._send_full(message)
        return
    now = int(time.time() * 1000)
    message.message_id = f"{connection._id_prefix}{next(connection._message_ids)}"
    message.timestamp = now
    message.destination = target
    message.delivery_mode = producer._delivery_mode
    message.priority = producer._priority
    ttl = producer._time_to_live
    message.expiration = now + int(ttl * 1000) if ttl > 0 else 0
    delay = producer._delivery_delay
    message.delivery_time = now + int(delay * 1000) if delay > 0 else now
    session._transport.send(message, session._tx)
