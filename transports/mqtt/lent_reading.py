"""An ``mqtt://`` connection's socket read by an asyncio event loop while paho's network
thread lends it the reading (``transports/reading_turn.py``, ``jmspy/aio/loop_reading.py``).

Why: paho reads on its own thread, so the PUBACK that completes ``await producer.send()``
and the PUBLISH an ``async for`` waits for each reached the loop through
``call_soon_threadsafe``: two hand-overs per message, each a wake-up of paho's thread and
then of the loop (about four context switches per message where aiomqtt, which reads on
the loop, takes one). Read on the loop, a packet resolves its waiter in the step that
reads it.

How: paho's network thread calls ``loop_read`` when the socket is readable; jmspy's
``loop_read`` (:mod:`.paho_private.buffered_read`) reads a block and handles its packets.
Here that step also notes which event loops its packets woke (an async waiter records
itself, as it does for ``stomp://``) and lends that loop the turn. While the turn is
lent, paho's thread waits in :meth:`ReadingTurn.wait_home` inside its ``loop_read``, and
the loop reads when it sees the socket readable, and after each read writes what paho
queued meanwhile (PUBLISHes made while others await their PUBACKs, which paho's thread
would have written after its read). The turn goes back to paho's thread:

* at once when a thread is about to wait for a packet (:func:`need_reader`: a sync
  send's PUBACK, room in the send window, a SUBACK), since that thread may be the
  loop's own, which cannot read while it waits; it asks again while it waits, as the
  turn may be lent again meanwhile;

* when a packet has waited unread for ``LOOP_TICK`` (the loop is stalled);
* when paho has writes queued while the loop is not reading (``want_write``: a
  SUBSCRIBE, a PINGREQ, a DISCONNECT, a write the socket could not take at once), at
  paho's thread's next look (``LOOP_TICK``), and when its
  keep-alive look is due (:data:`MISC_EVERY`): paho's thread then goes on with its loop
  (writes, keep-alive) and lends the turn again after the next read that wakes the loop;
* when the socket closes or the read fails: the loop's read returns paho's error code
  instead of acting on it, and paho's thread acts on it as its own read would have, so
  a drop is handled on paho's thread, where it always is. (A DISCONNECT packet the
  broker sends is acted on by paho where it is read; on the loop the transport's drop
  handling then runs there, which is safe for the reason it is on paho's thread: it
  first fails what waits for a packet, then takes only short locks.)

Only an event loop is lent the turn, never a sync session's thread, and only on a plain
TCP socket (over TLS decrypted bytes can wait where ``poll`` does not see them). With
jmspy's paho steps off (``JMSPY_LIBRARY_HOOKS=0``, an untested paho) nothing is lent.
"""

from __future__ import annotations

import socket
import time
import weakref
from typing import Any, Final

from jmspy.reading_lease import collect_woken, stop_collecting

from ..reading_turn import ReadingTurn
from .paho_private.buffered_read import block_reads

__all__ = ["MISC_EVERY", "READER_LOOK", "install", "need_reader"]

#: Seconds a lent turn lasts at most before paho's thread makes its keep-alive look.
MISC_EVERY: Final = 1.0
#: Seconds between a waiting thread's requests for a reader (:func:`need_reader`): the
#: turn may be lent again, even to the waiting loop, while it waits.
READER_LOOK: Final = 0.01


#: each client's turn (a client is made per connect; its turn goes with it)
_turns: weakref.WeakKeyDictionary[Any, ReadingTurn] = weakref.WeakKeyDictionary()


def need_reader(client: Any) -> None:
    """A thread is about to wait for a packet (a PUBACK, room in the send window): if an
    event loop holds the turn and is not reading right now, paho's thread takes it back
    at once. The waiter may be that loop's own thread (a window full of awaited sends),
    which cannot read while it waits; without this it would wait a whole ``LOOP_TICK``
    for paho's thread to see the packet left unread."""
    turn = _turns.get(client)
    if turn is not None:
        turn.need_reader()


class _ReadFailed(Exception):
    """What a holder's read met: paho's error code, for paho's thread to act on."""

    def __init__(self, rc: Any) -> None:
        super().__init__(f"paho read error {rc}")
        self.rc = rc


def install(client: Any) -> ReadingTurn | None:
    """Let paho ``client``'s network thread lend its reading to event loops (before it
    connects). None, changing nothing, if the client does not read a block at a time."""
    steps = block_reads(client)
    if steps is None:
        return None
    from paho.mqtt.enums import MQTTErrorCode

    success = MQTTErrorCode.MQTT_ERR_SUCCESS
    read_block, act_on = steps
    paho_read = client.loop_read  # jmspy's block read, paho's handling included
    lent_at = [0.0]

    def read_once() -> BaseException | None:
        """(The holder, on its loop.) One block and its packets, then what paho queued
        meanwhile (a PUBLISH made while others await their PUBACK goes through paho's
        queue, for the thread that reads their PUBACKs to write: now this one). paho's
        writer is under the same lock as jmspy's direct writes, so bytes of two packets
        never interleave."""
        rc = read_block()
        if rc > 0:
            return _ReadFailed(rc)
        if client.want_write():
            client.loop_write()  # a failed write closes the socket: the next read says so
        return None

    def due() -> bool:
        return bool(client.want_write()) or time.monotonic() - lent_at[0] >= MISC_EVERY

    turn = ReadingTurn(read_once, client.socket, lambda: client.socket() is not None,
                       due=due, sessions=False)

    def loop_read(max_packets: int = 1) -> Any:
        """(paho's network thread, the socket readable.) Read, or wait for a lent turn to
        come back and act on what its holder met."""
        if turn.lent():
            met = turn.wait_home()
            if isinstance(met, _ReadFailed):
                # paho's own read acts only on a socket still open (one closed already
                # had its drop reported by whoever closed it)
                return act_on(met.rc) if client.socket() is not None else met.rc
            if met is not None:
                raise met  # as if paho's own read had raised it
            return success
        woken = collect_woken()
        try:
            rc = paho_read(max_packets)
        finally:
            stop_collecting()
        if woken and not rc and type(client.socket()) is socket.socket:  # plain TCP
            lent_at[0] = time.monotonic()
            turn.lend(woken)
        return rc

    client.loop_read = loop_read
    _turns[client] = turn
    return turn
