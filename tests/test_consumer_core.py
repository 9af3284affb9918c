"""A consumer's hand-off of deliveries (``jmspy.consumer_core``): ``_deliver_many`` on
random consumer states makes its calls in order, under the consumer's lock where they
belong; a deleted field fails cleanly; the fields read and write like attributes."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, given, settings

import jmspy.consumer_core as pure
from jmspy import twins
from jmspy.message import TextMessage

TWINS = [pure]
SETTINGS = settings(max_examples=200, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow])


class Script:
    """A consumer's lock, condition, buffer and session, recording every call."""

    def __init__(self, real_buffer: bool) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.held = False
        script = self

        class Lock:
            def acquire(self) -> bool:
                script.held = True
                script.calls.append(("lock",))
                return True

            def release(self) -> None:
                script.held = False
                script.calls.append(("unlock",))

            def __enter__(self) -> bool:
                return self.acquire()

            def __exit__(self, *exc: object) -> None:
                self.release()

        class Cond:
            def notify(self, n: int = 1) -> None:
                script.calls.append(("notify", script.held))

        class Buffer:
            def push_many(self, items: list[Any]) -> None:
                script.calls.append(("push", [m.text for m in items], script.held))

        class Session:
            def _schedule(self, consumer: Any) -> None:
                script.calls.append(("schedule", consumer is script.core, script.held))

        self.lock, self.cond, self.session = Lock(), Cond(), Session()
        self.buffer: Any = (twins.prefetch.PrefetchBuffer(1000, 50) if real_buffer
                            else Buffer())
        self.core: Any = None


def make(module: Any, script: Script, state: dict[str, Any]) -> Any:
    core = module.ConsumerCore()
    core._session, core._lock, core._cond = script.session, script.lock, script.cond
    core._buffer = script.buffer
    core._listener = (lambda m: None) if state["listener"] else None
    core._closed = state["closed"]
    core._scheduled = state.get("scheduled", False)
    core._receiving = state["receiving"]
    watchers = [lambda i=i: script.calls.append(("watcher", i, script.held))
                for i in range(state.get("watchers", 0))]
    core._watchers = watchers or None
    script.core = core
    return core


states = st.fixed_dictionaries({
    "listener": st.booleans(),
    "closed": st.booleans(),
    "scheduled": st.booleans(),
    "receiving": st.integers(0, 2),
    "watchers": st.integers(0, 2),
    "real_buffer": st.booleans(),
    "runs": st.lists(st.lists(st.text("ab", max_size=3), min_size=1, max_size=4),
                     min_size=1, max_size=3),
})


def run(module: Any, state: dict[str, Any]) -> tuple[list[Any], list[str]]:
    script = Script(state["real_buffer"])
    core = make(module, script, state)
    for run_ in state["runs"]:
        core._deliver_many([TextMessage(text) for text in run_])
    buffered = []
    if state["real_buffer"]:
        while (m := script.buffer.pop()) is not None:
            buffered.append(m.text)
    return script.calls, buffered


@SETTINGS
@given(state=states)
def test_a_run_is_buffered_under_the_lock_and_its_reader_woken(state: dict[str, Any]) -> None:
    """What the hand-off must do: nothing but the lock round trip once closed; otherwise
    the run buffered under the lock, a blocked receive() woken under it when there is
    no listener, its watchers (an event loop's) called once each after the lock, and the
    session told after the lock is released when there is a listener and the consumer is
    not already waiting in the session's ready queue."""
    for module in TWINS:
        calls, buffered = run(module, state)
        expected: list[tuple[Any, ...]] = []
        watching = state["watchers"]
        for run_ in state["runs"]:
            expected.append(("lock",))
            if not state["closed"] and not state["real_buffer"]:
                expected.append(("push", run_, True))
            if not state["closed"] and not state["listener"] and state["receiving"]:
                expected.append(("notify", True))
            expected.append(("unlock",))
            if not state["closed"] and not state["listener"]:
                expected += [("watcher", i, False) for i in range(watching)]
                watching = 0  # one-shot
            if not state["closed"] and state["listener"] and not state["scheduled"]:
                expected.append(("schedule", True, False))
        assert calls == expected, module
        flat = [t for run_ in state["runs"] for t in run_]
        assert buffered == ([] if state["closed"] or not state["real_buffer"] else flat)


@pytest.mark.parametrize("module", TWINS, ids=lambda m: m.__name__)
def test_a_deleted_field_is_an_attribute_error_and_leaves_the_lock_free(module: Any) -> None:
    script = Script(real_buffer=False)
    core = make(module, script, {"listener": True, "closed": False, "receiving": 0})
    del core._buffer
    with pytest.raises(AttributeError, match="_buffer"):
        core._deliver_many([TextMessage("x")])
    assert not script.held


@pytest.mark.parametrize("module", TWINS, ids=lambda m: m.__name__)
def test_the_fields_read_and_write_like_attributes(module: Any) -> None:
    core = module.ConsumerCore()
    for i, name in enumerate(module.FIELDS):
        setattr(core, name, i)
    assert [getattr(core, name) for name in module.FIELDS] == list(range(len(module.FIELDS)))
    assert module.FIELDS == pure.FIELDS
