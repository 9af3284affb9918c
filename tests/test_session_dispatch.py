"""The session's dispatcher half (jmspy/session_dispatch.py) and the session agree."""

from __future__ import annotations

from jmspy import session_dispatch
from jmspy.session import Session


def test_the_dispatcher_uses_the_sessions_ack_mode_numbers() -> None:
    # session_dispatch cannot import Session (the session module imports it), so it keeps
    # its own copies of the two modes whose failed listeners get their message again.
    assert session_dispatch._AUTO_ACKNOWLEDGE == Session.AUTO_ACKNOWLEDGE
    assert session_dispatch._DUPS_OK_ACKNOWLEDGE == Session.DUPS_OK_ACKNOWLEDGE
    assert issubclass(Session, session_dispatch.SessionDispatcher)
