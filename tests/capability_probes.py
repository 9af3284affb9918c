"""One behavioural probe per capability-matrix feature, run against every target.

A probe exercises the feature the way an application would and asserts what JMS says
must happen (a window holds, a transaction hides uncommitted sends, a browser sees
without consuming...). On a target whose cell is *refused*, the same probe must stop
with the matrix's RefusedFeatureException at the first call that asks for the feature;
on a *native* or *emulated* one it must pass. ``check_cell`` runs one cell that way, so
tests/test_capabilities.py (vm://) and the interop suites (STOMP and MQTT against real
brokers) prove the same matrix the docs show.

Destinations are topics unless the feature is about queues: MQTT 3.1.1 has no queues,
and a topic subscriber must exist before anything is published. Messages carry only a
payload unless the feature is about headers, so MQTT 3.1.1 can take part.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from jmspy import ConnectionFactory, DeliveryMode, Session
from jmspy.capabilities import Feature, RefusedFeatureException, Support
from jmspy.message import MapMessage
from jmspy.transports.capabilities import cell

WAIT = 10.0


@dataclass
class Rig:
    """Where probes run: one column of the matrix and a plain URL for it (no opt-in
    query options, so refusals are the table's defaults)."""

    transport: str
    key: str
    url: str
    payload_only: bool = False  # MQTT 3.1.1: messages carry nothing but the payload

    def factory(self, **props: Any) -> ConnectionFactory:
        return ConnectionFactory(self.url, **props)

    def name(self, tag: str) -> str:
        return f"caps.{tag}.{uuid.uuid4().hex[:10]}"


def receive_texts(consumer: Any, n: int) -> list[str]:
    """The texts of the next ``n`` messages, each awaited up to WAIT s; fails naming how
    many arrived (the probes here and the MQTT and destination-option interop tests)."""
    out = []
    for _ in range(n):
        m = consumer.receive(WAIT)
        assert m is not None, f"only {len(out)} of {n} messages arrived: {out}"
        out.append(m.text)
    return out


class Listened:
    """A message listener on a new consumer of ``destination`` that keeps the texts it
    gets; ``done`` is set once ``n`` arrived (the interop tests' listener-order checks).
    With ``slow_first`` it takes that many seconds over the first message (the interop
    tests' slow-listener keepalive and heart-beat checks)."""

    def __init__(self, session: Any, destination: Any, n: int, slow_first: float = 0.0
                 ) -> None:
        self.texts: list[str] = []
        self.done = threading.Event()
        self._n = n
        self._slow_first = slow_first
        session.create_consumer(destination).set_message_listener(self._on_message)

    def _on_message(self, message: Any) -> None:
        if self._slow_first and not self.texts:
            time.sleep(self._slow_first)  # a slow listener: it holds the first message
        self.texts.append(message.text)
        if len(self.texts) == self._n:
            self.done.set()


@contextmanager
def _topic_consumer(rig: Rig, tag: str, ack_mode: int = Session.AUTO_ACKNOWLEDGE,
                    **props: Any) -> Iterator[tuple[Any, Any, Any]]:
    """A connection (``props`` on its factory) and a session in ``ack_mode`` with a
    consumer of a new topic named after ``tag``, started: ``(session, topic, consumer)``."""
    with rig.factory(**props).create_connection() as conn:
        s = conn.create_session(ack_mode=ack_mode)
        t = s.create_topic(rig.name(tag))
        c = s.create_consumer(t)
        conn.start()
        yield s, t, c


def _none_left(consumer: Any, wait: float = 0.5) -> None:
    m = consumer.receive(wait)
    assert m is None, f"unexpected message {getattr(m, 'text', m)!r}"


def _settle(seconds: float = 0.5) -> None:
    """Give a broker time to push what it is allowed to (to see that it stops)."""
    time.sleep(seconds)


# -- flow control ---------------------------------------------------------------------------
def consumer_window(rig: Rig) -> None:
    with _topic_consumer(rig, "window", imqConsumerFlowLimit=2) as (s, t, c):
        p = s.create_producer(t)
        for i in range(6):
            p.send(s.create_text_message(str(i)))
        _settle()
        assert c.flow_stats().buffered <= 2
        assert receive_texts(c, 6) == [str(i) for i in range(6)]


def started_with_four_each(conn: Any, s: Any, destinations: list[Any]) -> list[Any]:
    """One consumer per destination on session ``s`` and ``conn`` started, then four texts
    ``<name>-0`` .. ``<name>-3`` sent to each destination: the consumers, in order (the
    connection-flow-limit probe here and tests/stomp_server/test_client_flow_wire.py)."""
    consumers = [s.create_consumer(d) for d in destinations]
    conn.start()
    p = s.create_producer()
    for d in destinations:
        for i in range(4):
            p.send(s.create_text_message(f"{d.name}-{i}"), d)
    return consumers


def connection_flow_limit(rig: Rig) -> None:
    props = {"imqConnectionFlowLimitEnabled": True, "imqConnectionFlowLimit": 3}
    with rig.factory(**props).create_connection() as conn:
        s = conn.create_session()
        topics = [s.create_topic(rig.name("connflow")) for _ in range(2)]
        consumers = started_with_four_each(conn, s, topics)
        _settle()
        assert sum(c.flow_stats().buffered for c in consumers) <= 3
        got: dict[str, list[str]] = {t.name: [] for t in topics}
        deadline = time.monotonic() + WAIT
        while sum(map(len, got.values())) < 8 and time.monotonic() < deadline:
            for t, c in zip(topics, consumers, strict=True):
                m = c.receive(0.1)
                if m is not None:
                    got[t.name].append(m.text)
        assert got == {t.name: [f"{t.name}-{i}" for i in range(4)] for t in topics}


# -- destinations -----------------------------------------------------------------------
def _each_once(session: Any, destination: Any, c1: Any, c2: Any) -> None:
    """Send six messages to ``destination``; between them ``c1`` and ``c2`` (competing
    consumers) get each exactly once."""
    p = session.create_producer(destination)
    sent = [str(i) for i in range(6)]
    for text in sent:
        p.send(session.create_text_message(text))
    got: list[str] = []
    deadline = time.monotonic() + WAIT
    while len(got) < len(sent) and time.monotonic() < deadline:
        for c in (c1, c2):
            m = c.receive(0.1)
            if m is not None:
                got.append(m.text)
    assert sorted(got) == sent, f"each message once, got {got}"


def queues(rig: Rig) -> None:
    """Two consumers of one queue share its messages: each message reaches exactly one."""
    with rig.factory(imqConsumerFlowLimit=1).create_connection() as conn:
        s1, s2 = conn.create_session(), conn.create_session()
        q = s1.create_queue(rig.name("queue"))
        c1, c2 = s1.create_consumer(q), s2.create_consumer(q)
        conn.start()
        _each_once(s1, q, c1, c2)
        _none_left(c1, 0.3)
        _none_left(c2, 0.3)


def temporary_queues(rig: Rig) -> None:
    with rig.factory().create_connection() as conn:
        s = conn.create_session()
        tq = s.create_temporary_queue()
        c = s.create_consumer(tq)
        conn.start()
        s.create_producer(tq).send(s.create_text_message("reply"))
        assert receive_texts(c, 1) == ["reply"]


def destination_stats(rig: Rig) -> None:
    with rig.factory().create_connection() as conn:
        s = conn.create_session()
        q = s.create_queue(rig.name("stats"))
        p = s.create_producer(q)
        for i in range(3):
            p.send(s.create_text_message(str(i)))
        _settle(0.2)
        stats = conn.destination_stats(q)
        assert (stats["messageCount"], stats["enqueued"]) == (3, 3), stats


def reading_leases(rig: Rig) -> None:
    """Two of three messages lent to a token outlive their reader's connection; another
    connection settles them, and only the third is left to consume."""
    token = f"probe-{uuid.uuid4().hex[:10]}"
    with rig.factory().create_connection() as conn:
        assert conn.settle_leases([token]) == 0  # nothing lent yet (refused: raises here)
        s = conn.create_session(ack_mode=Session.INDIVIDUAL_ACKNOWLEDGE)
        q = s.create_queue(rig.name("leases"))
        p = s.create_producer(q)
        for i in range(3):
            p.send(s.create_text_message(str(i)))
        c = s.create_consumer(q)
        conn.start()
        got = [c.receive(WAIT) for _ in range(2)]
        assert [m.text if m else None for m in got] == ["0", "1"]
        s.lend_messages([m for m in got if m is not None], token)
    with rig.factory().create_connection() as driver:
        assert driver.settle_leases([token]) == 2
        s = driver.create_session()
        c = s.create_consumer(q)
        driver.start()
        assert receive_texts(c, 1) == ["2"]
        assert c.receive(0.3) is None


# -- selectors ------------------------------------------------------------------------------
def _selective_send(rig: Rig, s: Any, dest: Any) -> tuple[str, list[str], list[str]]:
    """Send four messages, two matching; returns (selector, matching, others)."""
    p = s.create_producer(dest)
    if rig.payload_only:  # only JMS headers travel: select on the delivery mode
        for i, mode in enumerate([1, 2, 1, 2]):
            p.send(s.create_text_message(str(i)), delivery_mode=mode)
        return "JMSDeliveryMode = 'PERSISTENT'", ["1", "3"], ["0", "2"]
    for i in range(4):
        p.send(s.create_text_message(str(i), properties={"pick": "yn"[i % 2]}))
    return "pick = 'n'", ["1", "3"], ["0", "2"]


def _only_matches(rig: Rig, conn: Any, s: Any, dest: Any) -> tuple[Any, list[str]]:
    """A selector consumer of ``dest`` gets exactly the matching half of what is sent;
    (that consumer, the texts it did not match)."""
    selector = "JMSDeliveryMode = 'PERSISTENT'" if rig.payload_only else "pick = 'n'"
    c = s.create_consumer(dest, selector)
    conn.start()
    _, matching, others = _selective_send(rig, s, dest)
    assert receive_texts(c, 2) == matching
    _none_left(c)
    return c, others


def topic_selectors(rig: Rig) -> None:
    with rig.factory().create_connection() as conn:
        s = conn.create_session()
        _only_matches(rig, conn, s, s.create_topic(rig.name("tsel")))


def queue_selectors(rig: Rig) -> None:
    """A selector takes only what matches; the rest stays on the queue for others."""
    with rig.factory().create_connection() as conn:
        s = conn.create_session()
        q = s.create_queue(rig.name("qsel"))
        c, others = _only_matches(rig, conn, s, q)
        c.close()
        assert receive_texts(s.create_consumer(q), 2) == others


# -- transactions and redelivery ----------------------------------------------------------
def transactions(rig: Rig) -> None:
    with rig.factory().create_connection() as conn:
        tx = conn.create_session(transacted=True)
        plain = conn.create_session()
        t = plain.create_topic(rig.name("tx"))
        c = plain.create_consumer(t)
        conn.start()
        p = tx.create_producer(t)
        p.send(tx.create_text_message("rolled back"))
        tx.rollback()
        p.send(tx.create_text_message("a"))
        p.send(tx.create_text_message("b"))
        _none_left(c)  # not before the commit
        tx.commit()
        assert receive_texts(c, 2) == ["a", "b"]
        _none_left(c, 0.3)


def _recovered(rig: Rig, check: Callable[[Any, int], None]) -> None:
    with _topic_consumer(rig, "recover", ack_mode=Session.CLIENT_ACKNOWLEDGE) as (s, t, c):
        s.create_producer(t).send(s.create_text_message("again"))
        for attempt in range(1, 4):
            m = c.receive(WAIT)
            assert m is not None and m.text == "again", f"attempt {attempt}: {m}"
            check(m, attempt)
            if attempt < 3:
                s.recover()
        m.acknowledge()
        _none_left(c, 0.3)


def redelivery(rig: Rig) -> None:
    def check(m: Any, attempt: int) -> None:
        assert m.redelivered == (attempt > 1)

    _recovered(rig, check)


def delivery_count(rig: Rig) -> None:
    def check(m: Any, attempt: int) -> None:
        count = m.get_property("JMSXDeliveryCount")
        assert count == attempt, f"attempt {attempt}: JMSXDeliveryCount {count}"

    _recovered(rig, check)


def browser(rig: Rig) -> None:
    with rig.factory().create_connection() as conn:
        s = conn.create_session()
        q = s.create_queue(rig.name("browse"))
        p = s.create_producer(q)
        for text in ("a", "b"):
            p.send(s.create_text_message(text))
        deadline = time.monotonic() + WAIT
        seen: list[str] = []
        while seen != ["a", "b"] and time.monotonic() < deadline:
            seen = [m.text for m in s.create_browser(q)]
        assert seen == ["a", "b"]
        c = s.create_consumer(q)  # browsing consumed nothing
        conn.start()
        assert receive_texts(c, 2) == ["a", "b"]


# -- message features -------------------------------------------------------------------------
def delivery_delay(rig: Rig) -> None:
    with _topic_consumer(rig, "delay") as (s, t, c):
        start = time.monotonic()
        s.create_producer(t, delivery_delay=1.0).send(s.create_text_message("later"))
        assert c.receive(0.4) is None, "delivered before its delivery delay"
        assert receive_texts(c, 1) == ["later"]
        assert time.monotonic() - start >= 0.9


def priority(rig: Rig) -> None:
    with _topic_consumer(rig, "prio") as (s, t, c):
        p = s.create_producer(t)
        p.send(s.create_text_message("low"), priority=1)
        p.send(s.create_text_message("high"), priority=9)
        got = {m.text: m.priority for m in (c.receive(WAIT), c.receive(WAIT)) if m is not None}
        assert got == {"low": 1, "high": 9}


def time_to_live(rig: Rig) -> None:
    with _topic_consumer(rig, "ttl") as (s, t, c):
        before = int(time.time() * 1000)
        s.create_producer(t, time_to_live=60.0).send(s.create_text_message("fresh"))
        m = c.receive(WAIT)
        assert m is not None and m.text == "fresh"
        assert before + 59_000 <= m.expiration <= before + 62_000, m.expiration


def headers(rig: Rig) -> None:
    with _topic_consumer(rig, "headers") as (s, t, c):
        p = s.create_producer(t)
        m = s.create_text_message("hdr", properties={"n": 7, "ok": True, "name": "x"})
        m.correlation_id = "corr-1"
        m.jms_type = "kind"
        p.send(m)
        p.send(s.create_map_message({"a": 1, "b": "two"}))
        got = c.receive(WAIT)
        assert got is not None and got.text == "hdr"
        assert (got.get_property("n"), got.get_property("ok"), got.get_property("name")) == (
            7, True, "x")
        assert (got.correlation_id, got.jms_type) == ("corr-1", "kind")
        got = c.receive(WAIT)
        assert isinstance(got, MapMessage) and got.map == {"a": 1, "b": "two"}


# -- subscriptions ----------------------------------------------------------------------------
def durable_subscriptions(rig: Rig) -> None:
    """Messages published while the subscriber is away wait for it."""
    client_id, name, topic = rig.name("cid"), rig.name("dur"), rig.name("durable")
    with rig.factory().create_connection(client_id=client_id) as conn:
        s = conn.create_session()
        s.create_durable_consumer(s.create_topic(topic), name).close()
    with rig.factory().create_connection() as other:
        s = other.create_session()
        s.create_producer(s.create_topic(topic)).send(
            s.create_text_message("while away"), delivery_mode=DeliveryMode.PERSISTENT)
        _settle(0.3)
    with rig.factory().create_connection(client_id=client_id) as conn:
        s = conn.create_session()
        c = s.create_durable_consumer(s.create_topic(topic), name)
        conn.start()
        assert receive_texts(c, 1) == ["while away"]


def unsubscribe(rig: Rig) -> None:
    """After unsubscribe(name) the subscription and what it held are gone."""
    client_id, name, topic = rig.name("cid"), rig.name("unsub"), rig.name("unsub")
    with rig.factory().create_connection(client_id=client_id) as conn:
        s = conn.create_session()
        t = s.create_topic(topic)
        s.create_durable_consumer(t, name).close()
        s.unsubscribe(name)
        s.create_producer(t).send(s.create_text_message("nobody's"))
        _settle(0.3)
        c = s.create_durable_consumer(t, name)  # a new, empty subscription
        conn.start()
        _none_left(c)


def shared_subscriptions(rig: Rig) -> None:
    with rig.factory(imqConsumerFlowLimit=1).create_connection() as conn:
        s1, s2 = conn.create_session(), conn.create_session()
        t = s1.create_topic(rig.name("shared"))
        name = rig.name("share")
        c1, c2 = s1.create_shared_consumer(t, name), s2.create_shared_consumer(t, name)
        conn.start()
        _each_once(s1, t, c1, c2)


def no_local(rig: Rig) -> None:
    topic = rig.name("nolocal")
    with rig.factory().create_connection() as conn:
        s = conn.create_session()
        c = s.create_consumer(s.create_topic(topic), no_local=True)
        conn.start()
        s.create_producer(s.create_topic(topic)).send(s.create_text_message("mine"))
        with rig.factory().create_connection() as other:
            so = other.create_session()
            so.create_producer(so.create_topic(topic)).send(so.create_text_message("theirs"))
        assert receive_texts(c, 1) == ["theirs"]
        _none_left(c)


def overlapping_subscriptions(rig: Rig) -> None:
    """Two subscriptions on one connection whose topics overlap each get their copy.

    The second one is a wildcard (over MQTT identical filters would share one MQTT
    subscription; different overlapping ones are what 3.1.1 cannot route)."""
    base = rig.name("overlap")
    with rig.factory().create_connection() as conn:
        s = conn.create_session()
        exact = s.create_consumer(s.create_topic(f"{base}.a"))
        wild = s.create_consumer(s.create_topic(f"{base}.*"))
        conn.start()
        s.create_producer(s.create_topic(f"{base}.a")).send(s.create_text_message("both"))
        assert receive_texts(exact, 1) == ["both"] and receive_texts(wild, 1) == ["both"]
        _none_left(exact, 0.3)
        _none_left(wild, 0.3)


def wildcard_subscriptions(rig: Rig) -> None:
    """``*`` matches one word, ``#`` and ``>`` any number after it, on every broker (the
    transport spells them the broker's way); each message says its concrete topic. One
    connection per pattern: overlapping subscriptions are a feature of their own."""
    base = rig.name("wild")
    patterns = (f"{base}.*", f"{base}.#", f"{base}.>")
    conns = [rig.factory().create_connection() for _ in patterns]
    try:
        consumers = []
        for conn, pattern in zip(conns, patterns, strict=True):
            s = conn.create_session()
            consumers.append(s.create_consumer(s.create_topic(pattern)))
            conn.start()
        s = conns[0].create_session()
        for name in (f"{base}.a", f"{base}.a.b", f"{rig.name('elsewhere')}.a"):
            s.create_producer(s.create_topic(name)).send(s.create_text_message(name))
        one, hashed, rest = consumers
        m = one.receive(WAIT)
        assert m is not None and m.text == f"{base}.a", m
        assert m.destination is not None and m.destination.name == f"{base}.a", m.destination
        assert receive_texts(hashed, 2) == [f"{base}.a", f"{base}.a.b"]
        assert receive_texts(rest, 2) == [f"{base}.a", f"{base}.a.b"]
        for c in consumers:
            _none_left(c, 0.3)
    finally:
        for conn in conns:
            conn.close()


def destination_options(rig: Rig) -> None:
    """``consumer.prefetchSize`` (the option every target with options takes) on a topic:
    the consumer's window is the lower of it and the client's limit, said to come from
    the destination, and messages still flow through the narrower window."""
    with rig.factory().create_connection() as conn:
        s = conn.create_session()
        name = rig.name("options")
        t = s.create_topic(f"{name}?consumer.prefetchSize=2")
        assert t == s.create_topic(name) and dict(t.options) == {"consumer.prefetchSize": "2"}
        c = s.create_consumer(t)
        stats = c.flow_stats()
        assert (stats.limit, stats.limited_by, stats.destination_limit) == (
            2, "destination", 2), stats
        conn.start()
        p = s.create_producer(t)
        for i in range(5):
            p.send(s.create_text_message(str(i)))
        assert receive_texts(c, 5) == [str(i) for i in range(5)]


PROBES: dict[Feature, Callable[[Rig], None]] = {
    Feature.CONSUMER_WINDOW: consumer_window,
    Feature.CONNECTION_FLOW_LIMIT: connection_flow_limit,
    Feature.QUEUES: queues,
    Feature.TOPIC_SELECTORS: topic_selectors,
    Feature.QUEUE_SELECTORS: queue_selectors,
    Feature.TRANSACTIONS: transactions,
    Feature.REDELIVERY: redelivery,
    Feature.DELIVERY_COUNT: delivery_count,
    Feature.BROWSER: browser,
    Feature.DELIVERY_DELAY: delivery_delay,
    Feature.PRIORITY: priority,
    Feature.TIME_TO_LIVE: time_to_live,
    Feature.HEADERS: headers,
    Feature.DURABLE_SUBSCRIPTIONS: durable_subscriptions,
    Feature.UNSUBSCRIBE: unsubscribe,
    Feature.SHARED_SUBSCRIPTIONS: shared_subscriptions,
    Feature.NO_LOCAL: no_local,
    Feature.OVERLAPPING_SUBSCRIPTIONS: overlapping_subscriptions,
    Feature.WILDCARD_SUBSCRIPTIONS: wildcard_subscriptions,
    Feature.TEMPORARY_QUEUES: temporary_queues,
    Feature.DESTINATION_STATS: destination_stats,
    Feature.DESTINATION_OPTIONS: destination_options,
    Feature.READING_LEASES: reading_leases,
}


def check_cell(rig: Rig, feature: Feature) -> None:
    """Run ``feature``'s probe on ``rig`` and hold it to the matrix cell."""
    c = cell(rig.transport, rig.key, feature)
    probe = PROBES[feature]
    if c.support is not Support.REFUSED:
        probe(rig)
        return
    with pytest.raises(RefusedFeatureException) as info:
        probe(rig)
    err = info.value
    assert (err.feature, err.transport, err.target) == (
        c.blocked_by or feature, rig.transport, rig.key)
    text = str(err)
    assert f"{rig.transport}://" in text and rig.url.split("?")[0].split("//")[1] in text, text
    blocking = cell(rig.transport, rig.key, c.blocked_by) if c.blocked_by else c
    assert blocking.instead in text, text
