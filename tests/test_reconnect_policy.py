"""The imqReconnect* properties turned into waits (jmspy/reconnect.py)."""

from __future__ import annotations

import itertools

import pytest

from jmspy import ConnectionFactory
from jmspy.errors import InvalidConfigurationException
from jmspy.reconnect import MAX_INTERVAL, ReconnectPolicy


def test_defaults_follow_open_mq() -> None:
    factory = ConnectionFactory("vm://embedded")
    policy = ReconnectPolicy.from_properties(factory.properties.snapshot())
    assert policy == ReconnectPolicy(enabled=False, attempts=6, interval=3.0)


def test_backoff_doubles_to_thirty_seconds_with_jitter() -> None:
    delays = list(ReconnectPolicy(True, 8, 1.0).delays())
    assert len(delays) == 8
    for attempt, delay in enumerate(delays):
        base = min(MAX_INTERVAL, 2.0**attempt)
        assert base * 0.8 <= delay <= base * 1.2


def test_minus_one_retries_forever() -> None:
    delays = ReconnectPolicy(True, -1, 0.1).delays()
    assert len(list(itertools.islice(delays, 100))) == 100


def test_out_of_range_attempts_are_refused() -> None:
    with pytest.raises(InvalidConfigurationException, match="imqReconnectAttempts"):
        ConnectionFactory("vm://embedded", imqReconnectAttempts=-2)
