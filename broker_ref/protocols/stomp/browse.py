"""Queue browsing over STOMP, in ActiveMQ 5's dialect.

A SUBSCRIBE with ``browser:true`` on a queue asks for a look at the queue without
consuming: the server answers with a MESSAGE frame per message it holds (in delivery
order, the subscription's ``selector`` applied), then one more MESSAGE with the header
``browser:end`` and an empty body, so the client knows the snapshot is complete. Nothing
is acknowledged or consumed; the client then UNSUBSCRIBEs the id. ActiveMQ uses exactly
these headers, so one client code path browses both brokers.
"""

from __future__ import annotations

from collections.abc import Mapping

from jmspy import twins
from jmspy.stomp_frames import Frame

from ...core import DestinationKind, ServerConnection
from . import mapping
from .mapping import Target
from .message_frame import encode_message

__all__ = ["browse_frames"]

_codec = twins.stomp_codec


def browse_frames(
    conn: ServerConnection,
    target: Target,
    sid: str,
    selector: str | None,
    version: str,
    local_temps: Mapping[str, str],
) -> list[bytes]:
    """The MESSAGE frames of one browse, the ``browser:end`` marker last. Needs the
    ``browse`` permission (the core checks it); only queues can be browsed."""
    if target.kind is not DestinationKind.QUEUE:
        raise mapping.HeaderError(
            "browser:true on a topic",
            "a browser looks at a queue's messages; a topic keeps none: subscribe instead")
    destination = mapping.render_destination(target.kind, target.name, local_temps)
    out = []
    for n, message in enumerate(conn.browse(target.name, selector), 1):
        reply = (mapping.render_destination(message.reply_to[0], message.reply_to[1],
                                            local_temps)
                 if message.reply_to is not None else None)
        out.append(encode_message(message, destination, sid, f"browse-{n}", 1, reply, version))
    out.append(_codec.encode_frame(Frame("MESSAGE", [
        ("subscription", sid), ("destination", destination),
        ("message-id", f"browse-end-{sid}"), ("browser", "end")], b""), version))
    return out
