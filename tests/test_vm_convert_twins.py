"""Differential tests for the vm:// message-mapping twins (``jmspy._cext.vm_convert`` and
``jmspy.transports.vm_convert``).

Random client messages of every body type (with properties, reply-to, correlation id,
type, priority, expiry and delivery delay) go through ``to_server_message`` with both
twins; the ServerMessages must be equal. Those go back through ``to_client_message`` and
``to_client_messages`` (a run with random tags and delivery counts) with both twins; the
client messages must have the same class and the same value in every slot, be read-only,
and share the broker copy's body and properties (received messages are not copied).
"""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from twin_support import message_view, needs_compiled_records

import jmspy._cext.vm_convert as cext
import jmspy.transports.vm_convert as pure
from jmspy import twins
from jmspy.broker_ref.core.api import BodyType, DestinationKind, ServerMessage
from jmspy.destinations import Queue, TemporaryQueue, Topic
from jmspy.errors import MessageNotWriteableException
from jmspy.message import BytesMessage, MapMessage, Message, TextMessage

SETTINGS = settings(
    max_examples=300, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow],
)

names = st.text("abcxyz._-", min_size=1, max_size=8)
destinations = st.one_of(
    names.map(Queue), names.map(Topic), names.map(lambda n: TemporaryQueue(f"temp-queue://{n}"))
)
prop_values = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                        st.floats(allow_nan=False), st.text(max_size=5))
props = st.dictionaries(st.sampled_from(["a", "b", "color", "n", "JMS_x"]), prop_values,
                        max_size=4)


class AppText(TextMessage):
    """An application's subclass, with a field of its own: converted by what it derives
    from."""

    __slots__ = ("extra",)


@st.composite
def client_messages(draw: st.DrawFn) -> Message:
    kind = draw(st.sampled_from(["text", "bytes", "map", "plain", "subclass"]))
    properties = draw(props)
    msg: Message
    if kind == "text":
        msg = TextMessage(draw(st.one_of(st.none(), st.text(max_size=20))), properties)
    elif kind == "bytes":
        msg = BytesMessage(draw(st.binary(max_size=20)), properties)
    elif kind == "map":
        msg = MapMessage(draw(st.dictionaries(st.sampled_from(["k1", "k2", "x"]),
                                               st.integers(-1000, 1000), max_size=3)), properties)
    elif kind == "subclass":
        msg = AppText(draw(st.one_of(st.none(), st.text(max_size=20))), properties)
    else:
        msg = Message(properties)
    msg.message_id = f"ID:{draw(st.integers(0, 10**6))}"
    msg.destination = draw(destinations)
    msg.reply_to = draw(st.one_of(st.none(), destinations))
    msg.correlation_id = draw(st.one_of(st.none(), st.text(max_size=5)))
    msg.jms_type = draw(st.one_of(st.none(), st.text(max_size=5)))
    msg.delivery_mode = draw(st.sampled_from([1, 2]))
    msg.priority = draw(st.integers(0, 9))
    msg.timestamp = draw(st.integers(0, 2**45))
    msg.expiration = draw(st.sampled_from([0, msg.timestamp + 1000]))
    msg.delivery_time = msg.timestamp + draw(st.sampled_from([0, 0, 500]))
    return msg


FIELDS = twins.message_record.FIELDS
TWINS = [pytest.param(cext, id="compiled", marks=needs_compiled_records),
         pytest.param(pure, id="pure")]



@needs_compiled_records
@SETTINGS
@given(client_messages(), st.integers(0, 2**31))
def test_to_server_message_twins_agree(msg: Message, connection_id: int) -> None:
    assert cext.to_server_message(msg, connection_id) == pure.to_server_message(
        msg, connection_id
    )


@needs_compiled_records
@SETTINGS
@given(
    st.lists(client_messages(), max_size=8),
    st.integers(-1, 2**40),
    st.lists(st.integers(1, 20), min_size=8, max_size=8),
)
def test_to_client_twins_agree(msgs: list[Message], first_tag: int, counts: list[int]) -> None:
    server = [pure.to_server_message(m, 7) for m in msgs]
    got_c = cext.to_client_messages(server, first_tag, counts)
    got_p = pure.to_client_messages(server, first_tag, counts)
    assert [message_view(m) for m in got_c] == [message_view(m) for m in got_p]
    for i, (sm, m) in enumerate(zip(server, got_c, strict=True)):
        assert m._delivery_tag == first_tag + i and m.delivery_count == counts[i]
        assert m.redelivered == (counts[i] > 1)
        assert m._properties is sm.properties  # shared, not copied
        one_c = cext.to_client_message(sm, first_tag + i, counts[i])
        one_p = pure.to_client_message(sm, first_tag + i, counts[i])
        assert message_view(one_c) == message_view(one_p) == message_view(m)


@needs_compiled_records
@SETTINGS
@given(
    st.lists(client_messages(), max_size=6),
    st.integers(1, 2**40),
    st.lists(st.integers(1, 20), min_size=6, max_size=6),
    st.integers(0, 2**31),
)
def test_deliver_many_twins_hand_over_the_same_run(
    msgs: list[Message], first_tag: int, counts: list[int], consumer_id: int
) -> None:
    """The broker's dispatch calls DeliverMany with a run of server messages; both twins
    pass the client connection the consumer, the first tag and the converted run."""
    server = [pure.to_server_message(m, 7) for m in msgs]
    heard: dict[str, list[tuple[int, int, list[dict[str, Any]]]]] = {"c": [], "p": []}
    for key, twin in (("c", cext), ("p", pure)):
        def on_deliveries(cid: int, tag: int, got: list[Message], key: str = key) -> None:
            heard[key].append((cid, tag, [message_view(m) for m in got]))

        hand_over = twin.DeliverMany(on_deliveries)
        assert hand_over.on_deliveries is on_deliveries
        hand_over(consumer_id, first_tag, server, counts)
    assert heard["c"] == heard["p"]
    [(cid, tag, views)] = heard["p"]
    assert (cid, tag) == (consumer_id, first_tag)
    assert views == [message_view(m) for m in pure.to_client_messages(server, first_tag, counts)]


@pytest.mark.parametrize("twin", TWINS)
def test_deliver_many_refuses_a_run_with_too_few_counts(twin: Any) -> None:
    sm = ServerMessage("ID:1", DestinationKind.QUEUE, "q")
    heard: list[object] = []
    with pytest.raises(ValueError, match="delivery counts"):
        twin.DeliverMany(lambda *args: heard.append(args))(5, 1, [sm, sm], [1])
    assert heard == []  # nothing half-delivered


@pytest.mark.parametrize("twin", TWINS)
def test_received_messages_are_read_only_and_browse_defaults(twin: Any) -> None:
    sm = ServerMessage("ID:1", DestinationKind.QUEUE, "q", BodyType.TEXT, "hi", {"a": 1})
    m = twin.to_client_message(sm)
    assert isinstance(m, TextMessage) and m.text == "hi" and m.get_property("a") == 1
    assert m._delivery_tag == -1 and m.delivery_count == 1 and not m.redelivered
    assert m.destination == Queue("q")
    with pytest.raises(MessageNotWriteableException):
        m.set_property("b", 2)
    with pytest.raises(MessageNotWriteableException):
        m.text = "changed"


@pytest.mark.parametrize("twin", TWINS)
def test_too_few_delivery_counts_is_refused(twin: Any) -> None:
    sm = ServerMessage("ID:1", DestinationKind.QUEUE, "q")
    with pytest.raises(ValueError, match="2 messages but only 1 delivery counts"):
        twin.to_client_messages([sm, sm], 1, [1])


def test_destinations_are_shared_per_name() -> None:
    for twin in (cext, pure):
        a = twin.to_destination(DestinationKind.TOPIC, "t")
        assert a is twin.to_destination(DestinationKind.TOPIC, "t") and a == Topic("t")
        assert isinstance(twin.to_destination(DestinationKind.QUEUE, "temp-queue://x"),
                          TemporaryQueue)


@pytest.mark.parametrize("twin", TWINS)
def test_a_message_with_a_deleted_header_is_refused_by_name(twin: Any) -> None:
    msg = TextMessage("x")
    msg.destination, msg.message_id = Queue("q"), "ID:1"
    del msg.priority
    with pytest.raises(AttributeError, match="priority"):
        twin.to_server_message(msg, 1)


@pytest.mark.parametrize("twin", TWINS)
def test_a_deleted_field_the_conversion_does_not_read_is_no_error(twin: Any) -> None:
    msg = TextMessage("x")
    msg.destination, msg.message_id = Queue("q"), "ID:1"
    del msg.redelivered  # a received-message header: sending never reads it
    assert twin.to_server_message(msg, 1).body == "x"
