"""Bad input gets a specific JMSException subclass whose message says what to do."""

from __future__ import annotations

import pytest

from jmspy import (
    ConnectionFactory,
    IllegalStateException,
    InvalidConfigurationException,
    InvalidDestinationException,
    InvalidSelectorException,
    JMSException,
    MessageFormatException,
    Queue,
    Session,
    TextMessage,
    UnknownTransportException,
)


def test_unknown_url_scheme_names_the_known_schemes():
    with pytest.raises(UnknownTransportException, match=r"'carrier'.*known schemes: .*vm"):
        ConnectionFactory("carrier://pigeon").create_connection()


def test_url_without_scheme_shows_an_example():
    with pytest.raises(UnknownTransportException, match="vm://embedded"):
        ConnectionFactory("localhost:61613").create_connection()


def test_unknown_property_suggests_the_close_match():
    with pytest.raises(InvalidConfigurationException,
                       match="Did you mean 'imqConsumerFlowLimit'"):
        ConnectionFactory("vm://x", imqConsumerFlowLimt=10)


def test_threshold_out_of_range_is_refused_with_the_range():
    factory = ConnectionFactory("vm://x")
    with pytest.raises(InvalidConfigurationException,
                       match=r"imqConsumerFlowThreshold=150 .* 0 to 100"):
        factory["imqConsumerFlowThreshold"] = 150


def test_negative_flow_limit_is_refused():
    with pytest.raises(InvalidConfigurationException,
                       match=r"imqConsumerFlowLimit=-5 is out of range"):
        ConnectionFactory("vm://x", imqConsumerFlowLimit=-5)


def test_wrong_property_type_is_refused():
    with pytest.raises(InvalidConfigurationException, match="must be True or False"):
        ConnectionFactory("vm://x", imqConnectionFlowLimitEnabled="yes")


def test_string_property_values_are_converted_like_a_properties_file():
    factory = ConnectionFactory("vm://x", imqConsumerFlowLimit="200",
                                imqConnectionFlowLimitEnabled="true")
    assert factory["imqConsumerFlowLimit"] == 200
    assert factory["imqConnectionFlowLimitEnabled"] is True


def test_bad_selector_points_at_the_bad_token(vm_factory):
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        with pytest.raises(InvalidSelectorException) as info:
            session.create_consumer(Queue("q"), selector="region = 'EU' AND AND qty > 1")
        assert info.value.position == 18
        assert "^" in str(info.value)


def test_send_on_a_closed_session_says_so(vm_factory):
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(Queue("q"))
        session.close()
        with pytest.raises(IllegalStateException, match="session is closed"):
            producer.send(session.create_text_message("x"))


def test_receive_on_a_consumer_with_a_listener_is_illegal(vm_factory):
    with vm_factory.create_connection() as conn:
        consumer = conn.create_session().create_consumer(Queue("q"))
        consumer.set_message_listener(lambda m: None)
        with pytest.raises(IllegalStateException, match="set_message_listener\\(None\\)"):
            consumer.receive(0.1)


def test_commit_on_a_non_transacted_session_is_illegal(vm_factory):
    with vm_factory.create_connection() as conn:
        session = conn.create_session(ack_mode=Session.CLIENT_ACKNOWLEDGE)
        with pytest.raises(IllegalStateException, match="transacted=True"):
            session.commit()
        with pytest.raises(IllegalStateException, match="recover"):
            session.rollback()


def test_recover_on_a_transacted_session_is_illegal(vm_factory):
    with vm_factory.create_connection() as conn, pytest.raises(
        IllegalStateException, match="rollback"
    ):
        conn.create_session(transacted=True).recover()


def test_unknown_ack_mode_lists_the_modes(vm_factory):
    with vm_factory.create_connection() as conn, pytest.raises(
        JMSException, match=r"Session\.AUTO_ACKNOWLEDGE"
    ):
        conn.create_session(ack_mode=42)


def test_invalid_destination_names_are_refused():
    with pytest.raises(InvalidDestinationException, match="must not be empty"):
        Queue("")
    with pytest.raises(InvalidDestinationException, match="whitespace"):
        Queue("my queue")


def test_bad_property_names_and_values_are_refused(vm_factory):
    with vm_factory.create_connection() as conn:
        msg = conn.create_session().create_text_message("x")
        with pytest.raises(MessageFormatException, match="not a valid identifier"):
            msg.set_property("1abc", 1)
        with pytest.raises(MessageFormatException, match="selector keyword"):
            msg.set_property("AND", 1)
        with pytest.raises(MessageFormatException, match="JMS properties are bool, int"):
            msg.set_property("obj", [1, 2])
        with pytest.raises(MessageFormatException, match="64-bit"):
            msg.set_property("big", 2**70)


def test_property_names_are_checked_every_time_not_only_the_first():
    """Valid names are remembered to skip re-checking them; a refused one never is, and
    names that are not plain str are always checked in full."""
    from jmspy.message import _VALID_NAMES

    class Name(str):
        pass

    for _ in range(3):
        msg = TextMessage("x", {"color": "red"})
        assert msg.get_property("color") == "red" and "color" in _VALID_NAMES
        with pytest.raises(MessageFormatException, match="not a valid identifier"):
            msg.set_property("1abc", 1)
        with pytest.raises(MessageFormatException, match="is reserved"):
            msg.set_property("JMSFoo", 1)
        with pytest.raises(MessageFormatException, match="non-empty str"):
            msg.set_property(["unhashable"], 1)  # type: ignore[arg-type]
        with pytest.raises(MessageFormatException, match="not a valid identifier"):
            msg.set_property(Name("a b"), 1)
    assert "1abc" not in _VALID_NAMES and "JMSFoo" not in _VALID_NAMES


def test_bad_priority_and_ttl_are_refused(vm_factory):
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        producer = session.create_producer(Queue("q"))
        with pytest.raises(JMSException, match="priority must be an int from 0 to 9"):
            producer.send(session.create_text_message("x"), priority=12)
        with pytest.raises(JMSException, match="time_to_live must be"):
            producer.time_to_live = -1


def test_operations_on_a_closed_connection_are_illegal(vm_factory):
    conn = vm_factory.create_connection()
    conn.close()
    with pytest.raises(IllegalStateException, match="connection is closed"):
        conn.create_session()
    conn.close()  # closing twice is fine


def test_producer_without_destination_needs_one_per_send(vm_factory):
    with vm_factory.create_connection() as conn:
        session = conn.create_session()
        with pytest.raises(InvalidDestinationException, match="pass one to send"):
            session.create_producer(None).send(session.create_text_message("x"))


def test_durable_subscription_without_client_id_explains_how_to_set_one(vm_factory):
    from jmspy import Topic

    with vm_factory.create_connection() as conn, pytest.raises(JMSException, match="client"):
        conn.create_session().create_durable_consumer(Topic("t"), "sub")


def test_vm_create_false_names_the_missing_broker():
    with pytest.raises(InvalidConfigurationException, match="no in-process broker named 'absent'"):
        ConnectionFactory("vm://absent?create=false").create_connection()


def test_unknown_stomp_dialect_is_refused_listing_the_known_ones():
    from jmspy.transports.stomp.mapping import DIALECTS

    with pytest.raises(JMSException, match="stomp:// dialect='qpid': use one of") as err:
        ConnectionFactory("stomp://127.0.0.1:1?dialect=qpid").create_connection()
    assert all(d in str(err.value) for d in DIALECTS)
