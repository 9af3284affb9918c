"""Destination statistics over STOMP, where the broker answers a request message.

* jmspy's broker: ``/jmspy/stats`` answers with JSON of every destination's counters.
* ActiveMQ 5 with ``<statisticsBrokerPlugin/>``: a message to
  ``ActiveMQ.Statistics.Destination.NAME`` with a ``reply-to`` gets a MapMessage back,
  which the STOMP connector renders as JSON (``transformation: jms-map-json``) only when
  XStream is on the broker's class path. Debian's ``activemq`` package lacks it (the
  connection then fails with NoClassDefFoundError), so the ActiveMQ profile keeps
  ``stats=False``; the parsing below is kept for brokers that have it.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from typing import Any

from jmspy import errors
from jmspy.destinations import Destination, Topic

from .mapping import BrokerProfile

__all__ = ["query_stats"]


def _activemq_map(text: str) -> dict[str, Any]:
    """Flatten XStream's JSON for a java.util.Map: {"map": {"entry": [{"string": [k, v]}
    | {"string": k, "long": v} ...]}}."""
    data = json.loads(text)
    entries = data.get("map", {}).get("entry", [])
    if isinstance(entries, dict):
        entries = [entries]
    out: dict[str, Any] = {}
    for entry in entries:
        key = entry.get("string")
        if isinstance(key, list):
            out[str(key[0])] = key[1]
            continue
        for kind, value in entry.items():
            if kind != "string":
                out[str(key)] = value
    return out


def query_stats(
    conn: Any, profile: BrokerProfile, where: str,
    replies: dict[str, Callable[[dict[str, str], bytes], None]], destination: Destination,
    timeout: float = 10.0, need_reader: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Ask the broker behind ``conn`` (a stomp.py connection) for ``destination``'s
    counters; ``replies`` routes the answer's subscription to this call."""
    family = profile.family
    sid = f"stats-{uuid.uuid4().hex[:8]}"
    reply_to = f"/temp-queue/jmspy-stats-{uuid.uuid4().hex[:8]}"
    done = threading.Event()
    answer: list[str] = []

    def collect(headers: dict[str, str], body: bytes) -> None:
        answer.append(body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body))
        done.set()

    replies[sid] = collect
    sub_headers = {"transformation": "jms-map-json"} if family == "ActiveMQ" else {}
    conn.subscribe(reply_to, id=sid, ack="auto", headers=sub_headers)
    try:
        if family == "ActiveMQ":
            target = f"/queue/ActiveMQ.Statistics.Destination.{destination.name}"
        else:
            target = "/jmspy/stats"
        conn.send(target, b"", headers={"reply-to": reply_to})
        need_reader()  # the answer comes as a MESSAGE frame
        if not done.wait(timeout):
            hint = (" (is <statisticsBrokerPlugin/> in activemq.xml?)"
                    if family == "ActiveMQ" else "")
            raise errors.JMSException(
                f"no statistics answer from {profile.server} at {where} within "
                f"{timeout:.0f}s{hint}")
    finally:
        replies.pop(sid, None)
        conn.unsubscribe(id=sid)
    if family == "ActiveMQ":
        stats = _activemq_map(answer[0])
        stats.setdefault("messageCount", stats.get("size"))
        stats.setdefault("deliveringCount", stats.get("inflightCount"))
        return stats
    kind = "topic" if isinstance(destination, Topic) else "queue"
    rows = json.loads(answer[0])
    for row in rows if isinstance(rows, list) else []:
        if row.get("name") == destination.name and row.get("kind", kind) == kind:
            return dict(row)
    raise errors.InvalidDestinationException(f"{destination} is unknown to the broker")
