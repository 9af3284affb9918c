"""A tiny blocking STOMP client over the shared codec, used by ``jmspy stat``.

Stats travel as an ordinary message: SEND to ``/jmspy/stats`` with a ``reply-to`` and the
broker answers with one MESSAGE whose JSON body is ``Broker.all_stats()``. No extra
command or admin frame type is needed, so any STOMP client (stomp.py, a shell with
``nc``) can ask too.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

from jmspy import twins
from jmspy.errors import JMSException
from jmspy.stomp_frames import HEARTBEAT, Frame
from jmspy.wire.error_text import error_text

from .mapping import STATS_DESTINATION, STATS_REPLY_HEADER

__all__ = ["COLUMNS", "fetch_report", "fetch_stats", "format_table", "format_usage"]

_codec = twins.stomp_codec

#: (header, key in DestinationStats.as_dict())
COLUMNS = (
    ("destination", "name"),
    ("kind", "kind"),
    ("messageCount", "messageCount"),
    ("deliveringCount", "deliveringCount"),
    ("scheduledCount", "scheduledCount"),
    ("messagesReplaced", "messagesReplaced"),
    ("consumers", "consumerCount"),
    ("expired", "expired"),
    ("deadLettered", "deadLettered"),
    ("stored", "storedCount"),
    ("inMemory", "inMemoryCount"),
    ("paged", "pagedCount"),
    ("memory", "memoryUsage"),
    ("memory%", "memoryPercentUsage"),
    ("blockedProducers", "blockedProducers"),
    ("discarded", "discarded"),
)


class StatsError(JMSException):
    """The broker refused or did not answer; the message says why."""


def _read(sock: socket.socket, parser: Any, deadline: float) -> Frame:
    while True:
        frame = parser.next_frame()
        if frame is not None and frame is not HEARTBEAT:
            assert isinstance(frame, Frame)
            if frame.command == "ERROR":
                first = dict(reversed(frame.headers))  # STOMP 1.2: the first one counts
                reason = error_text(first, frame.body.decode(errors="replace"))
                raise StatsError(f"broker error: {reason}")
            return frame
        if frame is HEARTBEAT:
            continue
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        data = sock.recv(65536)
        if not data:
            raise StatsError("the broker closed the connection")
        parser.feed(data)


def fetch_stats(
    host: str, port: int, *, user: str | None = None, password: str | None = None,
    timeout: float = 5.0,
) -> list[dict[str, Any]]:
    """Connect, ask for stats, disconnect. Raises :class:`StatsError` or OSError."""
    return fetch_report(host, port, user=user, password=password, timeout=timeout)[0]


def fetch_report(
    host: str, port: int, *, user: str | None = None, password: str | None = None,
    timeout: float = 5.0,
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Stats per destination, and the broker's usage (``Broker.usage()``, from the reply's
    ``jmspy-*`` headers, as strings). The temporary queue this request made for the answer
    is not among the destinations: the broker names it in the reply
    (``STATS_REPLY_HEADER``), and it exists only while this function runs."""
    deadline = time.monotonic() + timeout
    connect = [("accept-version", "1.2"), ("host", "/")]
    if user is not None:
        connect.append(("login", user))
    if password is not None:
        connect.append(("passcode", password))
    reply = "/temp-queue/jmspy.stat"
    with socket.create_connection((host, port), timeout=timeout) as sock:
        parser = _codec.FrameParser("1.2", None, False)
        sock.sendall(_codec.encode_frame(Frame("CONNECT", connect), "1.2"))
        if _read(sock, parser, deadline).command != "CONNECTED":
            raise StatsError("the broker did not answer CONNECT with CONNECTED")
        sock.sendall(
            _codec.encode_frame(Frame("SUBSCRIBE", [("id", "stat"), ("destination", reply)]))
            + _codec.encode_frame(Frame("SEND", [("destination", STATS_DESTINATION),
                                                 ("reply-to", reply)]))
        )
        frame = _read(sock, parser, deadline)
        while frame.command != "MESSAGE":
            frame = _read(sock, parser, deadline)
        sock.sendall(_codec.encode_frame(Frame("DISCONNECT", [])))
    rows: list[dict[str, Any]] = json.loads(frame.body)
    own = frame.header(STATS_REPLY_HEADER)  # the temporary queue made for this request
    rows = [row for row in rows if own is None or row.get("name") != own]
    usage = {name[len("jmspy-"):]: value for name, value in frame.headers
             if name.startswith("jmspy-")}
    return rows, usage


def _mb(value: str | None) -> str:
    return "?" if value is None else f"{int(value) / 1024**2:,.1f} MB"


def format_usage(usage: dict[str, str]) -> str:
    """The broker-wide line above the table: store, temp (spool), memory (seed 003's three
    usages, each of its limit) and the producers producer flow control holds."""
    store = usage.get("store")
    where = (f"store {store}: {_mb(usage.get('storeBytes'))} of {_mb(usage.get('storeLimit'))}"
             if store else "store: none (in memory)")
    temp = usage.get("tempUsed")
    temp_text = (f"temp {_mb(temp)} of {_mb(usage.get('tempLimit'))}" if temp is not None
                 else f"spool {_mb(usage.get('spoolBytes'))}")
    share = usage.get("destinationMemoryLimit")
    counted = usage.get("memoryCounted")
    counted_text = ""
    limit = max(1, int(usage.get("memoryLimit") or 0))
    if counted is not None and int(usage.get("memoryUsed") or 0) - int(counted) >= limit // 100:
        # destinations past their own limits: the broker's limit sees only their shares
        percent = int(counted) * 100 // limit
        counted_text = (f"; {_mb(counted)} ({percent} %) counted against it, each "
                        "destination up to its own limit")
    memory = (f"memory {_mb(usage.get('memoryUsed'))} of {_mb(usage.get('memoryLimit'))}"
              f" ({usage.get('memoryPercentUsage', '?')} %{counted_text}; paging past "
              f"{_mb(usage.get('memoryBudget'))}"
              + (f"; a destination's default share {_mb(share)}" if share is not None
                 else "") + ")")
    blocked = usage.get("blockedProducers")
    held = f"; producers waiting for space: {blocked}" if blocked not in (None, "0") else ""
    return (f"{where}; {temp_text}; {memory}{held}{_connections(usage)}"
            + _store_health(usage))


#: (usage key, what ``jmspy stat`` calls it) for the refusals and closes it lists
_TURNED_AWAY = (
    ("connectionsRefusedMaxConnections", "max-connections"),
    ("connectionsRefusedPerAddress", "per address"),
    ("connectionsRefusedLoginThrottled", "failed logins"),
    ("connectionsRefusedAuthentication", "wrong credentials"),
    ("connectionsClosedConnectTimeout", "closed: connect-timeout"),
    ("connectionsClosedIdle", "closed: idle-timeout"),
    ("connectionsClosedHeartbeat", "closed: heart-beats missed"),
)


def _connections(usage: dict[str, str]) -> str:
    """What the listeners turned away (only reasons that happened), and the input budget
    while frames being read hold some of it."""
    counts = [f"{name} {usage[key]}" for key, name in _TURNED_AWAY
              if usage.get(key) not in (None, "0")]
    text = f"; connections turned away: {', '.join(counts)}" if counts else ""
    held = usage.get("inputBytes")
    if held not in (None, "0"):
        text += (f"; frames being read {_mb(held)} of {_mb(usage.get('inputBudget'))}"
                 f" ({usage.get('inputPaused', '?')} connections paused)")
    return text


def _store_health(usage: dict[str, str]) -> str:
    """Lines under the usage line when the store has something to say: what a salvage at
    start recovered and lost, and why writes are refused now."""
    lines = []
    if "salvageRecovered" in usage:
        exact = usage.get("salvageLostExact", "1") == "1"
        lost = (f"{usage.get('salvageLost')} lost" + ("" if exact else " (at most)"))
        if not exact and usage.get("salvageLost") == "0" == usage["salvageRecovered"]:
            lost = "an unknown number lost (not one row of the file could be read)"
        lines.append(f"store salvaged at start ({usage.get('salvageReason')}): "
                     f"{usage['salvageRecovered']} messages recovered, {lost}; damaged "
                     f"file kept at {usage.get('salvageDamagedFile')}")
    if usage.get("storeState") not in (None, "ok"):
        lines.append(f"store {usage['storeState']}: {usage.get('storeFault')}")
    if usage.get("storeDroppedRows") not in (None, "0"):
        lines.append(f"store rows that could not be read: {usage['storeDroppedRows']}")
    return "".join("\n" + line for line in lines)


def format_table(rows: list[dict[str, Any]]) -> str:
    """A fixed-width table, one line per destination."""
    cells = [[h for h, _ in COLUMNS]]
    cells += [[str(row.get(key, "")) for _, key in COLUMNS] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(COLUMNS))]
    lines = []
    for r in cells:
        parts = [r[0].ljust(widths[0]), r[1].ljust(widths[1])]
        parts += [c.rjust(w) for c, w in zip(r[2:], widths[2:], strict=True)]
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)
