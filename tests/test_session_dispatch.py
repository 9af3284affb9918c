"""The session's dispatcher half (jmspy/session_dispatch.py) asks the acknowledgement
strategy, never the mode number."""

from __future__ import annotations

import inspect

from jmspy import session_dispatch
from jmspy._pure import dispatch
from jmspy.session import Session


def test_the_dispatcher_and_drain_never_compare_ack_mode_numbers() -> None:
    for module in (session_dispatch, dispatch):
        source = inspect.getsource(module)
        assert "ack_mode" not in source, module.__name__
        assert "AUTO_ACKNOWLEDGE =" not in source, module.__name__
    assert issubclass(Session, session_dispatch.SessionDispatcher)
