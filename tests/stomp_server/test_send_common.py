"""The common SEND (``SessionRecord.send_common``, send_path.py) against the session's
full path, its reference.

Two in-memory brokers (stomp_pair.py) get the same traffic; in one, every session's
``send_common`` is switched off, so each SEND takes the full path. Every frame either
broker writes, to any client, must be the same (message ids compared by order of first
appearance, since each broker names its own). The common case must really
be taken, and every header or destination the docstring sends down the full path must
send it there, changing nothing first.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import hypothesis.strategies as st
from broker_core.core_support import Recorder
from hypothesis import HealthCheck, given, settings
from stomp_pair import StompClient, StompPair

from jmspy import twins
from jmspy.broker_ref.protocols.stomp.mapping import STATS_DESTINATION
from jmspy.broker_ref.protocols.stomp.send_path import SLOW_HEADERS
from jmspy.stomp_frames import Frame, FrameError, header_dict

_codec = twins.stomp_codec
SETTINGS = settings(max_examples=250, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


def full_path_only(client: StompClient) -> None:
    """Switch the common SEND off for this client's session: every SEND takes the full
    path."""
    client.session.send_common = lambda *args: False  # type: ignore[method-assign]


def taken(client: StompClient) -> list[bool]:
    """Record what ``send_common`` answers for each SEND of this client."""
    answers: list[bool] = []
    original = client.session.send_common

    def spy(*args: Any) -> bool:
        answers.append(original(*args))
        return answers[-1]

    client.session.send_common = spy  # type: ignore[method-assign]
    return answers


class World:
    """A broker with a producer and a consumer subscribed to a queue and a topic."""

    def __init__(self, version: str, fast: bool, **broker: Any) -> None:
        self.pair = StompPair(**broker)
        self.consumer = self.pair.client(version)
        self.producer = self.pair.client(version)
        if not fast:
            full_path_only(self.producer)
        self.consumer.subscribe("/queue/a", "qa", "client-individual")
        self.consumer.subscribe("/topic/t", "tt")

    def frame(self, command: str, headers: dict[str, str], body: bytes,
              content_length: bool = True) -> list[Any]:
        """The producer sends a frame (``content_length`` False: none is added, so a body
        without one is text); every frame any session wrote in answer."""
        frame = Frame(command, list(headers.items()), body)
        self.producer.session.receive_data(
            _codec.encode_frame(frame, self.producer.version, content_length))
        return [self.view(f) for f in self.pair.pump()]

    @staticmethod
    def view(f: Frame) -> tuple[str, list[tuple[str, str]], bytes]:
        """A frame as comparable values. A message id is ``ID:<broker>-<run>-<connection>-
        <sequence>``: the broker's part differs between the two brokers, the connection and
        the sequence must not (a path that used up an id would show here)."""
        headers = [(k, "-".join(v.rsplit("-", 2)[-2:]) if k == "message-id" else v)
                   for k, v in f.headers]
        return f.command, headers, f.body

    def held(self) -> list[tuple[Any, ...]]:
        """Every field of every message the queues hold, as the core holds them (what the
        wire cannot show: a property the MESSAGE frame leaves out, the body's type)."""
        conn = self.pair.broker.connect(Recorder())
        out = []
        for queue in ("a", "b"):
            for m in conn.browse(queue):
                fields = {f.name: getattr(m, f.name) for f in dataclasses.fields(m)}
                fields["message_id"] = "-".join(m.message_id.rsplit("-", 2)[-2:])
                out.append(tuple(sorted(fields.items(), key=lambda kv: kv[0])))
        conn.close()
        return out

    def drain(self) -> list[Any]:
        """What is left in the queues: every field as held, then the frames a last
        subscriber takes them in."""
        held: list[Any] = self.held()
        rest = self.pair.client("1.2")
        out = [self.view(f) for f in rest.subscribe("/queue/a", "end")]
        out += [self.view(f) for f in rest.subscribe("/queue/b", "end-b")]
        return held + out


def test_a_common_send_is_taken_whole_and_answered_as_the_full_path_answers() -> None:
    for version in ("1.0", "1.1", "1.2"):
        fast, full = World(version, True), World(version, False)
        answers = taken(fast.producer)
        for world in (fast, full):
            world.frame("SEND", {"destination": "/queue/a"}, b"first use: parsed")
        for i in range(3):
            headers = {"destination": "/queue/a", "receipt": f"r:{i}\\x", "ts": f"{i}.5",
                       "content-length": "5"}
            assert fast.frame("SEND", headers, b"hello") == full.frame("SEND", headers,
                                                                          b"hello")
        text = {"destination": "/topic/t", "receipt": "t"}
        fast.frame("SEND", {"destination": "/topic/t"}, b"")
        full.frame("SEND", {"destination": "/topic/t"}, b"")
        assert fast.frame("SEND", text, "h\u00e9".encode(), False) == full.frame(
            "SEND", text, "h\u00e9".encode(), False)
        assert answers == [False, True, True, True, False, True]  # each first use: False
        assert fast.drain() == full.drain()


def blocked(headers: dict[str, str], body: bytes = b"x", *, prepare: bool = True,
            content_length: bool = True) -> None:
    """``send_common`` declines this SEND and changes nothing; the full path then
    handles it exactly as a session without the common SEND would."""
    fast, full = World("1.2", True), World("1.2", False)
    if prepare:  # the destination is known to both sessions
        for world in (fast, full):
            world.frame("SEND", {"destination": headers.get("destination", "/queue/a")},
                        b"first")
    answers = taken(fast.producer)
    assert fast.frame("SEND", headers, body, content_length) == full.frame(
        "SEND", headers, body, content_length)
    assert answers == [False]
    assert fast.drain() == full.drain()


def test_every_slow_header_sends_the_send_down_the_full_path() -> None:
    values = {"content-type": "text/plain", "persistent": "true", "priority": "7",
              "expires": "0", "AMQ_SCHEDULED_DELAY": "0", "jmspy-delivery-delay": "0",
              "correlation-id": "c", "reply-to": "/queue/b", "type": "t",
              "jmspy-ptypes": "n=i", "transaction": "tx1", "jmspy-send-timeout": "5"}
    for name in sorted(SLOW_HEADERS):
        headers = {"destination": "/queue/a", "receipt": "r", "n": "1",
                   name: values.get(name, "1")}
        blocked(headers)


def test_unknown_temp_stats_and_missing_destinations_take_the_full_path() -> None:
    blocked({"destination": "/queue/never-named", "receipt": "r"}, prepare=False)
    blocked({"destination": "/temp-queue/mine", "receipt": "r"})
    blocked({"receipt": "r"}, prepare=False)
    # a stats request is always the full path's (its name is no destination the session
    # could have cached; send_common checks it all the same)
    fast, full = World("1.2", True), World("1.2", False)
    answers = taken(fast.producer)
    headers = {"destination": STATS_DESTINATION, "reply-to": "/queue/b", "receipt": "r"}
    for _ in range(2):
        answer = fast.frame("SEND", headers, b"")
        assert [f[0] for f in answer] == [f[0] for f in full.frame("SEND", headers, b"")]
        assert "RECEIPT" in [f[0] for f in answer]
    assert answers == [False, False]


def test_a_send_parked_by_producer_flow_control_gets_its_receipt_when_space_frees() -> None:
    fast, full = (World("1.2", f, memory_limit=8 * 1024) for f in (True, False))
    answers = taken(fast.producer)
    body = b"k" * 1024
    for i in range(12):  # /queue/b has no consumer: past the limit, sends are held
        headers = {"destination": "/queue/b", "receipt": f"r{i}", "content-length": "1024"}
        assert fast.frame("SEND", headers, body) == full.frame("SEND", headers, body)
    assert fast.producer.session.held_sends == full.producer.session.held_sends > 0
    assert True in answers  # the common SEND parked some itself
    begin = {"transaction": "t1", "receipt": "begun"}  # the full path, answered at once
    assert fast.frame("BEGIN", begin, b"") == full.frame("BEGIN", begin, b"") != []
    assert fast.drain() == full.drain()  # draining frees space: the withheld RECEIPTs go
    receipts = [header_dict(f.headers)["receipt-id"] for f in fast.producer.others
                if f.command == "RECEIPT"]
    assert [r for r in receipts if r != "begun"] == [f"r{i}" for i in range(12)]  # in order
    assert receipts == [header_dict(f.headers)["receipt-id"] for f in full.producer.others
                        if f.command == "RECEIPT"]


def test_a_text_body_that_is_not_utf8_is_refused_by_the_full_path() -> None:
    blocked({"destination": "/queue/a", "receipt": "r"}, b"\xff\xfe", content_length=False)


NAMES = ["destination", "receipt", "content-length", "content-type", "persistent",
         "priority", "expires", "correlation-id", "reply-to", "type", "jmspy-ptypes",
         "transaction", "n", "color", "x:y", "jmspy-delivery-delay"]
VALUES = {"destination": st.sampled_from(["/queue/a", "/queue/b", "/topic/t", "/queue/a",
                                          "/temp-queue/mine", "bad", ""]),
          "content-type": st.sampled_from(["text/plain", "application/octet-stream"]),
          "persistent": st.sampled_from(["true", "false"]),
          "priority": st.sampled_from(["4", "9", "x"]),
          "expires": st.sampled_from(["0", "-1"]),
          "reply-to": st.sampled_from(["/queue/b", "/temp-queue/r"]),
          "jmspy-ptypes": st.sampled_from(["n=i", "n=f", "color=b"]),
          "transaction": st.just("tx"),
          "jmspy-delivery-delay": st.sampled_from(["0", "10"])}



@SETTINGS
@given(version=st.sampled_from(["1.0", "1.1", "1.2"]),
       sends=st.lists(st.tuples(st.dictionaries(st.sampled_from(NAMES), st.text(max_size=6),
                                                max_size=6),
                                st.sampled_from([b"", b"plain", "h\u00e9".encode(),
                                                 b"\xff bad", b"a\0b"]),
                                st.booleans(), st.booleans()),
                      min_size=1, max_size=12),
       data=st.data())
def test_any_send_traffic_ends_the_same_with_and_without_the_common_send(
        version: str, sends: list[tuple[dict[str, str], bytes, bool, bool]],
        data: Any) -> None:
    fast, full = World(version, True), World(version, False)
    for headers, body, begin, length in sends:
        for name in list(headers):
            if name in VALUES:
                headers[name] = data.draw(VALUES[name])
        if "content-length" in headers:
            headers["content-length"] = str(len(body))
        headers.setdefault("destination", "/queue/a")
        if begin and "transaction" in headers:
            for world in (fast, full):
                world.frame("BEGIN", {"transaction": headers["transaction"]}, b"")
        try:
            answer = fast.frame("SEND", dict(headers), body, length)
        except FrameError:  # a header this version cannot carry: not sent at all
            continue
        assert answer == full.frame("SEND", dict(headers), body, length)
        assert fast.producer.session.closing == full.producer.session.closing
    assert fast.drain() == full.drain()
    assert [header_dict(m.headers).get("subscription") for m in fast.consumer.messages] == [
        header_dict(m.headers).get("subscription") for m in full.consumer.messages]
