"""The MQTT hub's state in the broker's store, so that a broker restart (or a ``kill -9``)
keeps what Mosquitto's persistence keeps: persistent sessions with their subscriptions'
options, the QoS 2 packet ids in flight both ways, and retained messages.

The messages of an offline session are not here: they wait in the core's durable
subscriptions (:func:`.hub.durable_name`), which the store keeps already. What is here is
what the core does not know -- which subscriptions a client id has and how it asked for
them, when the session expires, which QoS 2 ids are routed already (so a resent PUBLISH
is not routed twice) and which wait for PUBCOMP (so their PUBREL goes out again) -- as
records of the store (:meth:`~jmspy.broker_ref.store.store.Store.put_state`), written in
the commit of the turn that changed them: the CONNACK, SUBACK, PUBREC or PUBCOMP that
follows that commit promises them, as a PUBACK promises its message.

Without a store (an in-memory broker) nothing is written and a restart starts empty, as
Mosquitto without ``persistence true`` does.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from jmspy.errors import JMSException

from ...core import ServerMessage
from ...core.security import Principal
from ...store.message_codec import CodecError, decode_message, encode_message
from .session_state import StoredSession, SubscriptionState

if TYPE_CHECKING:
    from ...store.store import Store

__all__ = ["RETAINED", "SESSIONS", "HubStore"]

log = logging.getLogger("jmspy.broker.mqtt")

#: the store's record kinds (:meth:`Store.put_state`)
SESSIONS = "mqtt-session"
RETAINED = "mqtt-retained"

#: the layout of a session record; a record of another layout is skipped, and logged
_LAYOUT = 1


class HubStore:
    """Reads and writes the hub's records (see the module docstring); ``store`` None: an
    in-memory broker, nothing kept."""

    def __init__(self, store: Store | None) -> None:
        self.store = store
        #: client id -> the record last written for it (a session unchanged since is not
        #: written again: the host asks after every turn)
        self._saved: dict[str, bytes] = {}

    def sessions(self, now: int) -> list[StoredSession]:
        """The persistent sessions stored. One whose connection was open when the broker
        stopped ended then: its expiry counts from ``now``, the restart."""
        if self.store is None:
            return []
        out = []
        for client_id, data in self.store.load_state(SESSIONS).items():
            try:
                record = json.loads(data)
                if record.get("layout") != _LAYOUT:
                    raise ValueError(f"layout {record.get('layout')!r}, not {_LAYOUT}")
                who = record["principal"]
                stored = StoredSession(
                    client_id, record["expiry"],
                    None if who is None else Principal(who[0], frozenset(who[1])),
                    {s[0]: SubscriptionState(*s) for s in record["subscriptions"]},
                    set(record["inbound_qos2"]), set(record["outbound_pubrel"]),
                    record["expires_at"])
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("MQTT session %r in the store cannot be read (%s): it is "
                            "dropped, and the client starts a new session", client_id, exc)
                self._write(lambda s, c=client_id: s.remove_state(SESSIONS, c))
                continue
            if stored.expires_at is None:
                stored.connection_ended(now)
            self._saved[client_id] = data
            out.append(stored)
        return out

    def retained(self) -> dict[str, ServerMessage]:
        """The retained messages stored, by core topic."""
        if self.store is None:
            return {}
        out = {}
        for topic, data in self.store.load_state(RETAINED).items():
            try:
                out[topic] = decode_message(data)
            except CodecError as exc:
                log.warning("retained message of %r in the store cannot be read (%s): "
                            "dropped", topic, exc)
                self._write(lambda s, t=topic: s.remove_state(RETAINED, t))
        return out

    def save(self, stored: StoredSession) -> None:
        """Write ``stored`` if it changed since it was last written."""
        if self.store is None:
            return
        data = _encode(stored)
        if self._saved.get(stored.client_id) != data:
            self._saved[stored.client_id] = data
            self._write(lambda s: s.put_state(SESSIONS, stored.client_id, data))

    def forget(self, client_id: str) -> None:
        """The session ended: its record goes."""
        if self.store is not None and self._saved.pop(client_id, None) is not None:
            self._write(lambda s: s.remove_state(SESSIONS, client_id))

    def retain(self, topic: str, msg: ServerMessage | None) -> None:
        """``msg`` is ``topic``'s retained message now (None: it has none)."""
        if self.store is None:
            return
        if msg is None:
            self._write(lambda s: s.remove_state(RETAINED, topic))
        else:
            data = encode_message(msg)
            self._write(lambda s: s.put_state(RETAINED, topic, data))

    def _write(self, call: Any) -> None:
        """One write; a store that refuses it is logged, not raised into the session
        (the store redoes writes it could not make once it writes again)."""
        assert self.store is not None
        try:
            call(self.store)
        except JMSException as exc:
            log.error("MQTT state not written to the store: %s", exc)


def _encode(stored: StoredSession) -> bytes:
    principal = stored.principal
    return json.dumps({
        "layout": _LAYOUT, "expiry": stored.expiry, "expires_at": stored.expires_at,
        "principal": None if principal is None else [principal.user,
                                                      sorted(principal.roles)],
        "subscriptions": [[s.topic_filter, s.qos, s.no_local, s.retain_as_published,
                           s.subscription_id, s.share]
                          for s in stored.subscriptions.values()],
        "inbound_qos2": sorted(stored.inbound_qos2),
        "outbound_pubrel": sorted(stored.outbound_pubrel),
    }, separators=(",", ":")).encode()
