"""MQTT 5 topic aliases from the broker to a client that allows them (Topic Alias
Maximum in its CONNECT): a topic is named once with its alias, then sent by alias alone;
once every alias is taken the least lately used one moves to the new topic; a client
that allows none gets topic names only; a PUBLISH dropped as too big teaches no alias."""

from __future__ import annotations

from typing import Any

from mqtt_pair import MqttPair


def _sent(pair: MqttPair, sub: Any) -> list[tuple[str, int | None]]:
    return [(m["topic"], m["props"].get("topic_alias")) for m in pair.inbox(sub)]


def _clients(**connect: Any) -> tuple[MqttPair, Any, Any]:
    pair = MqttPair()
    sub, pub = pair.client(5), pair.client(5)
    sub.connect("sub", **connect)
    sub.subscribe(1, ("t/#", 0))
    pub.connect("pub")
    return pair, sub, pub


def test_a_topic_is_named_once_then_sent_by_its_alias() -> None:
    pair, sub, pub = _clients(props={"topic_alias_maximum": 4})
    for topic in ("t/a", "t/a", "t/b", "t/a", "t/b"):
        pub.publish(topic, b"x")
    assert _sent(pair, sub) == [("t/a", 1), ("", 1), ("t/b", 2), ("", 1), ("", 2)]


def test_when_the_aliases_are_all_taken_the_least_lately_used_moves_to_the_new_topic(
) -> None:
    pair, sub, pub = _clients(props={"topic_alias_maximum": 2})
    for topic in ("t/a", "t/b", "t/a", "t/c", "t/b", "t/a"):
        pub.publish(topic, b"x")
    # t/c takes t/b's alias (t/a was used later); t/b then takes t/a's, and t/a t/c's
    assert _sent(pair, sub) == [("t/a", 1), ("t/b", 2), ("", 1), ("t/c", 2), ("t/b", 1),
                                ("t/a", 2)]


def test_a_client_that_allows_no_aliases_gets_topic_names() -> None:
    pair, sub, pub = _clients()
    for topic in ("t/a", "t/a"):
        pub.publish(topic, b"x")
    assert _sent(pair, sub) == [("t/a", None), ("t/a", None)]


def test_a_publish_dropped_as_too_big_for_the_client_teaches_it_no_alias() -> None:
    pair, sub, pub = _clients(props={"topic_alias_maximum": 4, "maximum_packet_size": 64})
    pub.publish("t/big", b"x" * 100)  # over the client's 64 bytes: dropped
    pub.publish("t/big", b"small")
    assert _sent(pair, sub) == [("t/big", 1)]  # named again: the first never arrived
