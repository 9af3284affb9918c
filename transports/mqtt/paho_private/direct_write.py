"""PUBLISH and PUBACK written on the caller's thread, instead of by paho's network thread.

Why: in paho's threaded mode (``loop_start``) every packet goes through one queue. The
calling thread appends it, writes a byte to a socket pair to wake the network thread out
of ``select``, and that thread writes the packet. So each PUBLISH of a producer and each
PUBACK of a consumer (whose listener runs on a session thread) costs a thread hand-off
and a trip round paho's loop. On the part (d) rows the sync MQTT 5 send went from
0.84-0.99x of raw paho to 1.08-1.13x with the packets written where they are made.

How, on one client *instance* (the way :mod:`.receive` replaces one paho step):

* A QoS 1 or 2 PUBLISH or a PUBACK is sent at once on the calling thread when nothing is
  queued ahead of it and paho's writer is not busy; a PUBLISH only when no other PUBLISH
  of the client awaits its acknowledgement (one synchronous send at a time). For these
  packets paho's writer does nothing after the bytes are out except note the time (its
  keep-alive clock), which is done here too.
* Everything else (CONNECT, SUBSCRIBE, PINGREQ, QoS 0 PUBLISH, whose write paho follows
  with ``on_publish``) and any packet that finds another one queued or the writer busy
  goes through paho's queue as before. So the bytes on the wire keep the order in which
  the packets were made, and paho's own handling stays in charge of everything but the
  write itself.
* One lock covers the direct write and paho's ``_packet_write``: bytes of two packets
  never interleave. The direct path only *tries* the lock, so it never waits for paho's
  writer, nor deadlocks with a callback paho runs while writing.
* A partial write queues the rest at the head of paho's queue and wakes the network
  thread, which finishes it. A failed write (the connection broke) hands the packet to
  paho's queue: paho's thread meets the same error and reports the loss as it always
  does.
* With PUBLISHes already in flight (asynchronous sends, a window of them), a new one
  goes through paho's queue instead: the network thread is awake anyway, reading their
  PUBACKs, and it writes what the sender queued meanwhile as one ``send()``: a run of
  queued packets that paho does nothing with after writing them (QoS >= 1 PUBLISH,
  PUBACK), up to :data:`MERGE_LIMIT` bytes, leaves in one write. Written one by one on
  the sender's thread, each PUBLISH cost the sender a system call and the broker a read
  and a wake-up. Part (d)'s 100-in-flight row on Mosquitto, per message, four rounds:
  producer 57 -> 41 us of CPU, consumer 47 -> 34, Mosquitto 26 -> 18 (raw paho's
  clients: 46, 57, 18); against raw paho in the same rounds 1.05-1.10x -> 1.24-1.27x.
* Only on a plain TCP socket: a TLS or WebSocket connection keeps paho's path.

Over TLS (``mqtts://``) this steps aside, on purpose: a write on the caller's thread would
run OpenSSL's write on the connection while paho's thread reads it, and one TLS
connection (one ``SSL`` object) must not be read and written by two threads at once; a
non-blocking TLS write that cannot finish must also be retried with the same bytes,
which paho's writer does. So every packet goes through paho's queue and thread over TLS
(tests/interop/test_tls_streams.py checks that messages still flow whole and in order).

``tests/test_mqtt_direct_write.py`` drives a real paho client over a socket pair;
the interop tests check that a connected ``mqtt://`` transport uses this path.
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

__all__ = ["install", "installed"]

_PUBLISH = 0x30
_PUBACK = 0x40
_MARK = "_jmspy_direct_write"
#: At most this many bytes of queued packets are joined into one write.
MERGE_LIMIT = 65536


def installed(client: Any) -> bool:
    """True if ``client`` writes its PUBLISH and PUBACK packets directly."""
    return bool(getattr(client, _MARK, False))


def install(client: Any) -> bool:
    """Write ``client``'s QoS >= 1 PUBLISH and PUBACK packets on the calling thread
    (see the module). False, with paho's path left in place, if this paho has no such
    steps."""
    queue_packet = getattr(client, "_packet_queue", None)
    write_packets = getattr(client, "_packet_write", None)
    out = getattr(client, "_out_packet", None)
    clock_lock = getattr(client, "_msgtime_mutex", None)
    if (not callable(queue_packet) or not callable(write_packets) or out is None
            or clock_lock is None or not hasattr(client, "_sock")
            or not hasattr(client, "_out_messages")
            or not hasattr(client, "_last_msg_out")):
        return False
    from paho.mqtt.enums import MQTTErrorCode

    success = MQTTErrorCode.MQTT_ERR_SUCCESS
    writer = threading.Lock()
    plain = socket.socket
    monotonic = time.monotonic  # paho's keep-alive clock

    pending = client._out_messages  # paho's PUBLISHes awaiting their ack (made once)

    def packet_write() -> Any:
        with writer:
            if len(out) > 1:
                _join_runs(out)
            return write_packets()

    def packet_queue(command: int, packet: bytes | bytearray, mid: int, qos: int,
                     info: Any = None) -> Any:
        kind = command & 0xF0
        # paho registers a PUBLISH in _out_messages before queueing it: more than one
        # there means others are in flight, and the network thread writes this one.
        if (kind == _PUBACK or (kind == _PUBLISH and qos and len(pending) <= 1)) \
                and not out and writer.acquire(False):
            try:
                sock = client._sock
                if not out and type(sock) is plain:
                    try:
                        sent = sock.send(packet)
                    except BlockingIOError:
                        sent = 0
                    except OSError:
                        sent = -1  # paho's thread meets the error and reports it
                    if sent >= 0:
                        if sent < len(packet):
                            _queue_rest(client, command, packet, mid, qos, info, sent)
                        with clock_lock:
                            client._last_msg_out = monotonic()
                        return success
            finally:
                writer.release()
        return queue_packet(command, packet, mid, qos, info)

    client._packet_write = packet_write
    client._packet_queue = packet_queue
    setattr(client, _MARK, True)
    return True


def _join_runs(out: Any) -> None:
    """Join each run of unstarted packets in paho's queue ``out`` that paho does nothing
    with once written (QoS >= 1 PUBLISH, PUBACK) into one packet of at most
    :data:`MERGE_LIMIT` bytes (a single larger packet stays as it is), so paho's writer
    sends a run with one system call. Order is kept.

    Called holding the writer lock: no other thread takes from the head meanwhile, while
    other threads may append at the tail. So the packets there now are taken from the
    head and put back at the head, joined; anything appended meanwhile stays behind them
    (deque operations are atomic, iterating one is not)."""
    runs: list[tuple[list[Any], int]] = []
    for _ in range(len(out)):
        packet = out.popleft()
        size = len(packet["packet"])
        if runs and _joinable(packet):
            run, total = runs[-1]
            if _joinable(run[0]) and total + size <= MERGE_LIMIT:
                run.append(packet)
                runs[-1] = (run, total + size)
                continue
        runs.append(([packet], size))
    joined = []
    for run, total in runs:
        if len(run) == 1:
            joined.append(run[0])
        else:
            data = b"".join(packet["packet"] for packet in run)
            joined.append({**run[0], "packet": data, "to_process": total})
    out.extendleft(reversed(joined))


def _joinable(packet: Any) -> bool:
    """A queued packet not begun that paho does nothing with after writing it."""
    kind: int = packet["command"] & 0xF0
    return not packet["pos"] and (
        kind == _PUBACK or (kind == _PUBLISH and int(packet["qos"]) > 0))


def _queue_rest(client: Any, command: int, packet: bytes | bytearray, mid: int, qos: int,
                info: Any, sent: int) -> None:
    """The socket took ``sent`` bytes of ``packet``: the rest goes first in paho's queue
    (it was empty) and the network thread is woken to write it, as paho's own queueing
    does."""
    client._out_packet.append({
        "command": command, "mid": mid, "qos": qos, "pos": sent,
        "to_process": len(packet) - sent, "packet": packet, "info": info,
    })
    wake = getattr(client, "_sockpairW", None)
    if wake is not None:
        try:
            wake.send(b"0")
        except BlockingIOError:
            pass  # already full of wake-ups: the thread is coming anyway
    register = getattr(client, "_call_socket_register_write", None)
    if callable(register):
        register()
