"""What the single-owner flow window tests share (``stomp_server/test_flow_one_owner.py``,
``interop/test_mqtt_flow_one_owner.py``): a record of every delivery a transport hands a
consumer, with the credit the consumer's flow accounting held just before it."""

from __future__ import annotations

from typing import Any

import pytest

from jmspy.connection import Connection

__all__ = ["HandOvers", "record_hand_overs"]


class HandOvers:
    """Each entry is the accounting's unused credit just before one hand-over: a
    hand-over at 0 is one the accounting never granted (a transport deciding by a count
    of its own)."""

    def __init__(self) -> None:
        self.credit_before: list[int] = []

    def over_credit(self) -> list[int]:
        """The positions of hand-overs made without credit (empty when all were right)."""
        return [i for i, credit in enumerate(self.credit_before) if credit <= 0]


def record_hand_overs(monkeypatch: pytest.MonkeyPatch) -> HandOvers:
    """Record every ``TransportListener.on_delivery`` of every connection in the test (a
    test module's ``hand_overs`` fixture calls this)."""
    record = HandOvers()
    deliver = Connection.on_delivery

    def on_delivery(self: Connection, consumer_id: int, tag: int, message: Any,
                    count: int) -> None:
        consumer = self._consumers.get(consumer_id)
        if consumer is not None:
            record.credit_before.append(consumer._buffer.outstanding)
        deliver(self, consumer_id, tag, message, count)

    monkeypatch.setattr(Connection, "on_delivery", on_delivery)
    return record
