"""The two frames a busy ``stomp://`` client writes per message -- SEND and ACK -- encoded
by jmspy's own STOMP codec and written through stomp.py's transport.

Why not ``conn.send`` / ``conn.ack``: stomp.py builds a ``Frame``, calls every listener's
``on_send``, escapes and encodes each header in Python and joins the lines, which costs
several times the codec's compiled ``encode_frame`` (measured: ~15 us for a SEND with
jmspy's headers against ~4 us; ~8 us against ~3 us for an ACK), paid once per message on
each side of a benchmark that stomp.py itself is compared with. The bytes still go
through ``transport.send``, stomp.py's own socket lock, so they interleave with the
frames stomp.py writes (CONNECT, SUBSCRIBE, heart-beats, DISCONNECT) whole.

What is skipped is only stomp.py's ``on_send`` bookkeeping: its heart-beat listener
then sends its EOLs on schedule even while frames flow, which the broker ignores.
A TLS transport queues frames for its I/O thread (``blocking`` false); there the
writer steps aside and stomp.py sends, so frames never overtake each other.

The write lock. stomp.py guards its socket with a ``threading.BoundedSemaphore(1)``,
which is Python code built on a Condition: 1.2 us per ``with`` against 0.16 us for a
``threading.Lock`` (timeit, CPython 3.11), paid for every SEND on a producer and every ACK
on a consumer. For one holder at a time the two mean the same thing, so
:func:`use_c_write_lock` gives each connection a ``Lock`` in its place before it
connects (as :func:`~jmspy.transports.stomp.receive.install` replaces the read step on
one instance); every write, stomp.py's own included, still goes through that one lock.
"""

from __future__ import annotations

from typing import Any

from jmspy import twins
from jmspy.stomp_frames import Frame

from .stomppy_private import replace_write_lock

__all__ = ["FrameWriter", "use_c_write_lock"]

_codec = twins.stomp_codec


def _plain(value: str) -> bool:
    """Whether a header value goes out as it is: nothing STOMP 1.1/1.2 escape, and no CR
    (which the codec has its own rules for)."""
    return "\\" not in value and "\n" not in value and ":" not in value and "\r" not in value


def use_c_write_lock(conn: Any) -> bool:
    """Give the stomp.py connection ``conn`` (not yet connected: no thread can hold the
    old lock) a ``threading.Lock`` as its socket write lock, through
    :mod:`.stomppy_private`. False, changing nothing, off a tested stomp.py: its own,
    slower, lock then stays in use (``tests/test_stomp_wire.py`` checks which)."""
    transport = getattr(conn, "transport", None)
    return transport is not None and replace_write_lock(transport)


class FrameWriter:
    """Writes SEND and ACK frames for one stomp.py connection (``conn``)."""

    __slots__ = ("_conn", "_direct", "_encode", "_send", "_version")

    def __init__(self, conn: Any, version: str) -> None:
        self._conn = conn
        self._version = version
        transport: Any = getattr(conn, "transport", None)
        self._direct = bool(getattr(transport, "blocking", False)) and hasattr(
            transport, "send")
        self._send = transport.send if self._direct else None
        self._encode = _codec.encode_frame

    @property
    def conn(self) -> Any:
        return self._conn

    def send(self, destination: str, body: bytes, headers: dict[str, str]) -> None:
        if self._send is None:
            self._conn.send(destination, body, headers=headers)
            return
        items = [("destination", destination), *headers.items()]
        self._send(self._encode(Frame("SEND", items, body), self._version))

    def ack(self, acks: list[tuple[str, str]], tx: str | None,
            extra: tuple[tuple[str, str], ...] = ()) -> None:
        """One ACK frame per ``(ack id, subscription id)``, in order. Several (a
        CLIENT_ACKNOWLEDGE ``acknowledge()``, a DUPS_OK batch) go out in one write:
        still one frame per message, as ``ack:client-individual`` requires, but one
        system call and, with TCP_NODELAY, one segment instead of one each. ``extra``:
        headers every frame carries (a reading lease's)."""
        if self._send is None:
            more = dict(extra)
            for ack_id, sub_id in acks:
                if self._version == "1.2":
                    self._conn.ack(ack_id, transaction=tx, **more)
                else:
                    self._conn.ack(ack_id, sub_id, transaction=tx, **more)
            return
        frames = [self._ack_frame(ack_id, sub_id, tx, extra) for ack_id, sub_id in acks]
        self._send(frames[0] if len(frames) == 1 else b"".join(frames))

    def _ack_frame(self, ack_id: str, sub_id: str, tx: str | None,
                   extra: tuple[tuple[str, str], ...] = ()) -> bytes:
        if tx is None and not extra and _plain(ack_id) and (
                self._version == "1.2" or _plain(sub_id)):
            # Nothing to escape (broker ack ids are like these): the codec's bytes for
            # this frame, without its per-frame checks (one ACK: 1.18 -> 0.63 us).
            if self._version == "1.2":
                return b"ACK\nid:" + ack_id.encode() + b"\n\n\x00"
            return (b"ACK\nmessage-id:" + ack_id.encode() + b"\nsubscription:"
                    + sub_id.encode() + b"\n\n\x00")
        if self._version == "1.2":
            items = [("id", ack_id)]
        else:
            items = [("message-id", ack_id), ("subscription", sub_id)]
        if tx is not None:
            items.append(("transaction", tx))
        items.extend(extra)
        encoded: bytes = self._encode(Frame("ACK", items, b""), self._version)
        return encoded
