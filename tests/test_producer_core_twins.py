"""Differential tests for the producer twins (``jmspy._cext.producer_core`` and
``jmspy._pure.producer_core``): ``ProducerCore.send`` with random defaults and per-send
arguments, valid and not, over a scripted session, must stamp the same headers, make the
same calls in the same order and raise the same errors with both; ``MessageIds`` must
count the same IDs, never twice across threads; ``now_ms`` must read the wall clock.

The compiled ``send`` writes the headers into the compiled message record's C fields, so
it runs on the compiled records only (``twin_support``)."""

from __future__ import annotations

import threading
import time
from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings
from twin_support import record_twins

import jmspy._pure.producer_core as pure
from jmspy import _speedups
from jmspy import api_twins as twins
from jmspy.destinations import Destination, Queue, Topic
from jmspy.errors import IllegalStateException, JMSException
from jmspy.message import DeliveryMode, Message, TextMessage

SETTINGS = settings(
    max_examples=300, deadline=None, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


def _compiled() -> Any:
    import jmspy._cext.producer_core as cext

    return cext


def twin_modules() -> list[Any]:
    """The pure twin, and the compiled one unless the records are pure."""
    return record_twins(pure, None if _speedups.PURE_PYTHON else _compiled())


class Script:
    """A session, its connection and transport, recording every call ``send`` makes."""

    def __init__(self, life: Any, *, session_open: bool = True,
                 tx: str | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.ids = 0
        script = self
        #: the state records, of the lifecycle twin the producer twin reads
        self.session_life = life.SessionLife()
        self.connection_life = life.ConnectionLife()
        self.session_open = session_open

        class Ack:
            pass

        ack = Ack()
        ack.tx = tx  # type: ignore[attr-defined]

        class Transport:
            def send(self, message: Message, tx: str | None = None) -> None:
                script.calls.append(("send", message.message_id, tx))

        class Connection:
            _life = script.connection_life

            def _next_message_id(self) -> str:
                script.ids += 1
                script.calls.append(("id",))
                return f"ID:test-{script.ids}"

            def _send_async(self, session: Any, message: Message, tx: str | None,
                            listener: Any) -> None:
                script.calls.append(("send_async", message.message_id, tx, listener))

        class Session:
            _life = script.session_life
            _connection = Connection()
            _transport = Transport()
            acknowledgement = ack

            def _check_open(self) -> None:
                script.calls.append(("check_open",))
                if not script.session_open:
                    raise IllegalStateException("the session is closed; create a new session")

        self.session = Session()

    @property
    def session_open(self) -> bool:
        return not self.session_life.closed

    @session_open.setter
    def session_open(self, value: bool) -> None:
        self.session_life.closed = not value


def lifecycle_of(module: Any) -> Any:
    """The state-record twin a producer twin reads (the compiled one needs its C type)."""
    if module is pure:
        import jmspy._pure.lifecycle as life
    else:
        import jmspy._cext.lifecycle as life  # type: ignore[no-redef]
    return life


def producer_class(module: Any) -> type:
    """A MessageProducer-like subclass of the twin's core (its ``_target`` rules)."""

    class Producer(module.ProducerCore):  # type: ignore[misc,name-defined]
        def _target(self, destination: Destination | None) -> Destination:
            if self.destination is not None:
                if destination is not None and destination != self.destination:
                    raise JMSException(f"this producer sends to {self.destination}")
                return self.destination  # type: ignore[no-any-return]
            if destination is None:
                raise JMSException("this producer has no destination")
            return destination

    return Producer


unset = st.just(None)
modes = st.one_of(unset, st.sampled_from([1, 2, DeliveryMode.PERSISTENT, 0, 3, True, "2"]))
priorities = st.one_of(unset, st.integers(-2, 11), st.sampled_from([True, 4.0, "4"]))
seconds = st.one_of(unset, st.floats(0, 1e6, allow_nan=False), st.integers(0, 10**6),
                    st.sampled_from([-1, -0.5, False, "1"]))
destinations = st.one_of(unset, st.sampled_from([Queue("a"), Queue("b"), Topic("a")]))

sends = st.fixed_dictionaries({
    "own": destinations,
    "destination": destinations,
    "delivery_mode": modes,
    "priority": priorities,
    "time_to_live": seconds,
    "delivery_delay": seconds,
    "async": st.booleans(),
    "closed": st.booleans(),
    "session_open": st.booleans(),
    "tx": st.sampled_from([None, "tx-1"]),
    "message": st.sampled_from(["text", "not a message"]),
    "defaults": st.fixed_dictionaries({
        "_delivery_mode": st.sampled_from([DeliveryMode.PERSISTENT, DeliveryMode.NON_PERSISTENT]),
        "_priority": st.integers(0, 9),
        "_time_to_live": st.sampled_from([0.0, 1.5, 60.0]),
        "_delivery_delay": st.sampled_from([0.0, 0.25]),
    }),
})


def run_send(module: Any, case: dict[str, Any]) -> tuple[Any, ...]:
    """Send as ``case`` says with ``module``'s core: (outcome, headers relative to the
    clock, calls)."""
    script = Script(lifecycle_of(module), session_open=case["session_open"], tx=case["tx"])
    producer = producer_class(module)(script.session, case["own"])
    for name, value in case["defaults"].items():
        setattr(producer, name, value)
    producer._closed = case["closed"]
    message: Any = TextMessage("hi") if case["message"] == "text" else "hi"
    listener = (lambda m, e: None) if case["async"] else None
    kwargs = {k: case[k] for k in ("delivery_mode", "priority", "time_to_live",
                                   "delivery_delay") if case[k] is not None}
    before = module.now_ms()
    try:
        producer.send(message, case["destination"], completion_listener=listener, **kwargs)
    except JMSException as exc:
        return ("raised", type(exc), str(exc)), None, script.calls
    after = module.now_ms()
    assert before <= message.timestamp <= after
    now = message.timestamp
    headers = (message.message_id, message.destination, message.delivery_mode,
               type(message.delivery_mode), message.priority, message.expiration - now
               if message.expiration else 0, message.delivery_time - now)
    calls = [c if c[0] != "send_async" else (*c[:3], c[3] is listener) for c in script.calls]
    return ("sent",), headers, calls


@SETTINGS
@given(case=sends)
def test_both_twins_stamp_call_and_refuse_alike(case: dict[str, Any]) -> None:
    results = [run_send(module, case) for module in twin_modules()]
    assert all(r == results[0] for r in results[1:]), results


@given(case=sends)
@SETTINGS
def test_a_send_stamps_the_headers_the_jms_rules_give(case: dict[str, Any]) -> None:
    """What both twins must do, checked on the running one: the producer's defaults
    unless the send names its own, expiry and delivery time from the send's clock."""
    outcome, headers, calls = run_send(twins.producer_core, case)
    if outcome[0] == "raised":
        return
    d = case["defaults"]
    message_id, destination, mode, mode_type, prio, ttl_ms, delay_ms = headers
    assert message_id == "ID:test-1"
    assert destination == (case["own"] or case["destination"])
    assert mode == (d["_delivery_mode"] if case["delivery_mode"] is None
                    else case["delivery_mode"]) and mode_type is DeliveryMode
    assert prio == (d["_priority"] if case["priority"] is None else case["priority"])
    ttl = d["_time_to_live"] if case["time_to_live"] is None else case["time_to_live"]
    delay = d["_delivery_delay"] if case["delivery_delay"] is None else case["delivery_delay"]
    assert ttl_ms == (int(ttl * 1000) if ttl > 0 else 0)
    assert delay_ms == (int(delay * 1000) if delay > 0 else 0)
    last = ("send_async", "ID:test-1", case["tx"], True) if case["async"] else (
        "send", "ID:test-1", case["tx"])
    assert calls == [("id",), last]  # open: the session is not asked


@pytest.mark.parametrize("module", twin_modules(), ids=lambda m: m.__name__)
def test_a_closed_producer_or_session_sends_nothing(module: Any) -> None:
    script = Script(lifecycle_of(module))
    producer = producer_class(module)(script.session, Queue("q"))
    producer._closed = True
    with pytest.raises(IllegalStateException, match="producer is closed"):
        producer.send(TextMessage("x"))
    producer._closed = False
    script.session_open = False
    with pytest.raises(IllegalStateException, match="session is closed"):
        producer.send(TextMessage("x"))
    assert script.calls == [("check_open",)]


@pytest.mark.parametrize("module", twin_modules(), ids=lambda m: m.__name__)
def test_message_ids_count_from_one_and_never_repeat_across_threads(module: Any) -> None:
    ids = module.MessageIds("ID:abc-7-")
    assert [ids.next_id() for _ in range(3)] == ["ID:abc-7-1", "ID:abc-7-2", "ID:abc-7-3"]
    got: list[list[str]] = [[] for _ in range(4)]

    def take(out: list[str]) -> None:
        for _ in range(5000):
            out.append(ids.next_id())

    threads = [threading.Thread(target=take, args=(out,)) for out in got]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for out in got for i in out]
    assert len(set(every)) == 20000
    assert {int(i.rsplit("-", 1)[1]) for i in every} == set(range(4, 20004))


@pytest.mark.parametrize("module", twin_modules(), ids=lambda m: m.__name__)
def test_now_ms_reads_the_wall_clock_in_milliseconds(module: Any) -> None:
    before = int(time.time() * 1000)
    got = module.now_ms()
    after = int(time.time() * 1000)
    assert type(got) is int and before <= got <= after


@pytest.mark.parametrize("module", twin_modules(), ids=lambda m: m.__name__)
@pytest.mark.parametrize("state", ["session closing", "session closed",
                                   "connection closing", "connection closed"])
def test_any_closing_or_closed_flag_makes_send_ask_the_session(module: Any,
                                                             state: str) -> None:
    """An open session and connection cost a send no call; any of the four flags sends
    it to the session's ``_check_open``, whose error names what is closed."""
    script = Script(lifecycle_of(module))
    producer = producer_class(module)(script.session, Queue("q"))
    producer.send(TextMessage("x"))
    assert ("check_open",) not in script.calls
    owner, flag = state.split()
    setattr(script.session_life if owner == "session" else script.connection_life, flag, True)
    if state == "session closed":  # the fake's check reads this flag: it refuses
        with pytest.raises(IllegalStateException, match="session is closed"):
            producer.send(TextMessage("x"))
        assert script.calls[-1] == ("check_open",)
        return
    producer.send(TextMessage("x"))  # the fake's check passes: only the call is recorded
    assert script.calls[-3:] == [("check_open",), ("id",), ("send", "ID:test-2", None)]
