"""Fixtures for the broker-core tests: one broker on a fake clock, one recording
connection. Helpers live in core_support.py."""

from __future__ import annotations

import pytest
from core_support import FakeClock, Recorder

from jmspy.broker_ref.core import Broker, ServerConnection


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def broker(clock: FakeClock) -> Broker:
    return Broker(clock=clock)


@pytest.fixture
def rec() -> Recorder:
    return Recorder()


@pytest.fixture
def conn(broker: Broker, rec: Recorder) -> ServerConnection:
    return broker.connect(rec)
