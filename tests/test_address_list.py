"""Address lists (``imqAddressList`` and its twins): parsing, refusals, and the order in
which a connection tries the brokers (jmspy/address_list.py, jmspy/reconnect.py).

The plans are walked with a scripted RNG and a fake sleeper: no wall clock."""

from __future__ import annotations

from typing import Any

import pytest

from jmspy import ConnectionFactory, JMSException
from jmspy.address_list import parse, resolve
from jmspy.errors import InvalidConfigurationException, JMSSecurityException
from jmspy.reconnect import CLOSED, MAX_INTERVAL, ReconnectPolicy, connect_first, retry_with_backoff


class ScriptedRng:
    """Reverses on shuffle (records each call) and returns the middle of every jitter."""

    def __init__(self) -> None:
        self.shuffles = 0

    def uniform(self, a: float, b: float) -> float:
        return (a + b) / 2

    def shuffle(self, x: list[Any]) -> None:
        self.shuffles += 1
        x.reverse() if self.shuffles % 2 else x.insert(0, x.pop())  # two distinct orders


# -- the plan -------------------------------------------------------------------------------
def test_priority_tries_the_addresses_in_order_on_every_pass() -> None:
    policy = ReconnectPolicy(True, attempts=2, interval=1.0, iterations=2)
    plan = list(policy.plan(3, ScriptedRng()))
    assert [i for i, _ in plan] == [0, 0, 1, 1, 2, 2] * 2


def test_random_shuffles_each_pass_with_the_injected_rng() -> None:
    rng = ScriptedRng()
    policy = ReconnectPolicy(True, attempts=1, interval=1.0, behavior="RANDOM",
                             iterations=2)
    plan = list(policy.plan(3, rng))
    assert [i for i, _ in plan] == [2, 1, 0, 2, 0, 1]
    assert rng.shuffles == 2


def test_iterations_times_attempts_bound_the_plan() -> None:
    for addresses, attempts, iterations in [(1, 6, 1), (3, 2, 4), (2, 1, 1)]:
        policy = ReconnectPolicy(True, attempts=attempts, interval=0.1,
                                 iterations=iterations)
        assert len(list(policy.plan(addresses))) == addresses * attempts * iterations


def test_waits_double_from_the_interval_and_the_next_address_goes_at_once() -> None:
    policy = ReconnectPolicy(True, attempts=3, interval=1.0, iterations=2)
    waits = [w for _, w in policy.plan(2, ScriptedRng())]
    # pass 1: a0 at once (a reconnect along a list starts without waiting), then waits 1,
    # 2; a1 at once, then 4, 8; pass 2: a0 waits 16, then 30 (the cap)...
    assert waits == [0.0, 1.0, 2.0, 0.0, 4.0, 8.0, 16.0, MAX_INTERVAL, MAX_INTERVAL,
                     0.0, MAX_INTERVAL, MAX_INTERVAL]


def test_a_reconnect_along_a_list_tries_its_first_address_at_once() -> None:
    # the cluster case: the node this connection was on died; with a single attempt per
    # address the client must reach the next node without sleeping imqReconnectInterval
    policy = ReconnectPolicy(True, attempts=1, interval=5.0, iterations=3)
    plan = list(policy.plan(3, ScriptedRng()))
    assert plan[:3] == [(0, 0.0), (1, 0.0), (2, 0.0)]
    assert plan[3] == (0, 5.0)  # the second pass is paced by the interval


def test_one_address_keeps_the_old_backoff() -> None:
    assert list(ReconnectPolicy(True, 3, 0.5).plan(1, ScriptedRng())) == [
        (0, 0.5), (0, 1.0), (0, 2.0)]


def test_forever_with_a_list_moves_along_it_one_attempt_each() -> None:
    plan = ReconnectPolicy(True, attempts=-1, interval=1.0, iterations=-1).plan(2)
    assert [next(plan)[0] for _ in range(6)] == [0, 1, 0, 1, 0, 1]


def test_retry_walks_the_plan_with_the_injected_sleeper_and_moves_on() -> None:
    tried: list[int] = []
    slept: list[float] = []

    def attempt(index: int) -> None:
        tried.append(index)
        if index != 2:
            raise JMSException(f"broker {index} is down")

    policy = ReconnectPolicy(True, attempts=2, interval=0.25)
    outcome = retry_with_backoff(policy, attempt, lambda: False, addresses=3,
                                 rng=ScriptedRng(), sleep=slept.append)
    assert outcome is None
    assert tried == [0, 0, 1, 1, 2]
    # the first attempt at every address went at once (a0's too: a reconnect along a list
    # starts without waiting); only the retries of one address waited
    assert slept == [0.25, 0.5]


def test_retry_gives_up_after_the_whole_plan_naming_the_count() -> None:
    def attempt(index: int) -> None:
        raise JMSException(f"broker {index} is down")

    policy = ReconnectPolicy(True, attempts=2, interval=0.1, iterations=3)
    outcome = retry_with_backoff(policy, attempt, lambda: False, addresses=2,
                                 sleep=lambda s: None)
    assert outcome == "gave up after 12 reconnect attempts: broker 1 is down"


def test_retry_stops_when_closed() -> None:
    assert retry_with_backoff(ReconnectPolicy(True, 5, 0.1), lambda i: None, lambda: True,
                              sleep=lambda s: None) == CLOSED


def test_first_connection_tries_each_address_once_per_pass() -> None:
    tried: list[int] = []
    slept: list[float] = []

    def attempt(index: int) -> None:
        tried.append(index)
        if len(tried) < 5:
            raise JMSException("refused")

    policy = ReconnectPolicy(False, attempts=6, interval=1.0, iterations=2)
    connect_first(policy, ["stomp://a:1", "stomp://b:2", "stomp://c:3"], attempt,
                  rng=ScriptedRng(), sleep=slept.append)
    assert tried == [0, 1, 2, 0, 1]
    assert slept == [1.0]  # between the passes only: the interval


def test_first_connection_failing_everywhere_names_every_broker() -> None:
    def attempt(index: int) -> None:
        raise JMSException(f"nothing listens on port {index + 1}")

    with pytest.raises(JMSException) as failed:
        connect_first(ReconnectPolicy(), ["stomp://a:1", "stomp://b:2"], attempt)
    assert "stomp://a:1: nothing listens on port 1" in str(failed.value)
    assert "stomp://b:2: nothing listens on port 2" in str(failed.value)


def test_a_refused_login_stops_at_the_first_broker() -> None:
    tried: list[int] = []

    def attempt(index: int) -> None:
        tried.append(index)
        raise JMSSecurityException("bad password")

    with pytest.raises(JMSSecurityException):
        connect_first(ReconnectPolicy(), ["stomp://a:1", "stomp://b:2"], attempt)
    assert tried == [0]


# -- the properties -------------------------------------------------------------------------
def test_defaults_and_snake_case_twins() -> None:
    factory = ConnectionFactory("stomp://a:1")
    assert factory["imqAddressList"] is None
    assert factory["imqAddressListBehavior"] == "PRIORITY"
    assert factory["imqAddressListIterations"] == 1
    twins = ConnectionFactory(address_list="stomp://a:1,stomp://b:2",
                              address_list_behavior="random", address_list_iterations=3,
                              reconnect_enabled=True, reconnect_attempts=2,
                              reconnect_interval=500)
    assert twins["imqAddressList"] == "stomp://a:1,stomp://b:2"
    assert twins["address_list_iterations"] == 3
    policy = ReconnectPolicy.from_properties(twins.properties.snapshot())
    assert policy == ReconnectPolicy(True, 2, 0.5, "RANDOM", 3)
    assert twins.url == "stomp://a:1,stomp://b:2"


@pytest.mark.parametrize(("value", "problem"), [
    ("stomp://a:1,,stomp://b:2", "empty entry"),
    ("stomp://a:1,", "empty entry"),
    ("stomp://a:1,mqtt://b:2", "mixes schemes"),
    ("stomp://a:1,b:2", "is not a URL"),
])
def test_bad_address_lists_are_refused_naming_the_problem(value: str, problem: str) -> None:
    with pytest.raises(InvalidConfigurationException, match=problem):
        ConnectionFactory(imqAddressList=value)
    with pytest.raises(InvalidConfigurationException, match=problem):
        ConnectionFactory(value).create_connection()


def test_an_unknown_behavior_is_refused_with_the_choices() -> None:
    with pytest.raises(InvalidConfigurationException, match="PRIORITY, RANDOM"):
        ConnectionFactory("stomp://a:1", imqAddressListBehavior="ROUND_ROBIN")


def test_the_url_and_the_property_must_not_contradict() -> None:
    props = {"imqAddressList": "stomp://a:1,stomp://b:2"}
    assert resolve(None, props) == ["stomp://a:1", "stomp://b:2"]
    assert resolve("stomp://a:1, stomp://b:2", props) == ["stomp://a:1", "stomp://b:2"]
    with pytest.raises(InvalidConfigurationException, match="different brokers"):
        resolve("stomp://c:3", props)
    assert parse(" stomp://a:1 ,stomp://b:2") == ["stomp://a:1", "stomp://b:2"]


def test_a_vm_list_is_refused_clearly() -> None:
    with pytest.raises(InvalidConfigurationException, match="connects to one broker"):
        ConnectionFactory("vm://a,vm://b").create_connection()


def test_a_list_of_one_vm_broker_is_just_that_broker(vm_broker: Any) -> None:
    with ConnectionFactory(imqAddressList=f"vm://{vm_broker.name}").create_connection() as c:
        assert c.where == f"vm://{vm_broker.name}"


def test_where_names_the_broker_of_the_list_that_answered(server_port: int) -> None:
    dead = _free_port()
    url = f"stomp://127.0.0.1:{dead},stomp://127.0.0.1:{server_port}"
    with ConnectionFactory(url).create_connection() as conn:
        assert conn.where == f"stomp://127.0.0.1:{server_port}"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def server_port() -> Any:
    from stomp_server.stomp_support import ServerHandle

    handle = ServerHandle()
    try:
        yield handle.port
    finally:
        handle.stop()


def test_first_connection_with_endless_iterations_makes_one_pass() -> None:
    tried: list[int] = []

    def attempt(index: int) -> None:
        tried.append(index)
        raise JMSException("refused")

    with pytest.raises(JMSException, match="any broker of the address list"):
        connect_first(ReconnectPolicy(True, -1, 0.1, iterations=-1),
                      ["stomp://a:1", "stomp://b:2"], attempt, sleep=lambda s: None)
    assert tried == [0, 1]
