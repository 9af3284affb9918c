"""Whether a connection is started, closing or closed, and a session closing or closed,
as records of their own (pure twin).

The compiled twin is ``cython_ext/lifecycle.pyx``, whose fields are C flags
(``jmspy/_cext/lifecycle.pxd``); ``tests/test_lifecycle_twins.py`` holds both to the same
behaviour. Change one, change the other.

Why records of their own rather than attributes of the :class:`~jmspy.connection.Connection`
and :class:`~jmspy.session.Session`: the two per-message loops read them, the listener
dispatch (``drain``, after every listener call: did the connection stop, the session
start closing?) and the producer's ``send`` (is the session still open?). As attributes
of those Python classes each read is a generic lookup, and five of them cost the compiled
listener path about a sixth of its time; the compiled loops read these records' C fields
directly. Each record has one owner that writes it: the connection its
:class:`ConnectionLife`, the session its :class:`SessionLife`.
"""

from __future__ import annotations

__all__ = ["ConnectionLife", "SessionLife"]


class ConnectionLife:
    """A connection's state: delivery started, a close begun, the close done."""

    __slots__ = ("closed", "closing", "started")

    def __init__(self) -> None:
        self.started = False
        self.closing = False
        self.closed = False

    def __repr__(self) -> str:
        return (f"ConnectionLife(started={self.started}, closing={self.closing}, "
                f"closed={self.closed})")


class SessionLife:
    """A session's state: a close begun, the close done."""

    __slots__ = ("closed", "closing")

    def __init__(self) -> None:
        self.closing = False
        self.closed = False

    def __repr__(self) -> str:
        return f"SessionLife(closing={self.closing}, closed={self.closed})"
