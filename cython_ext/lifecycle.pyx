# cython: language_level=3
"""Connection and session state records (compiled twin).

The pure twin ``jmspy/_pure/lifecycle.py`` says why these exist; the fields are declared
in ``jmspy/_cext/lifecycle.pxd`` as C flags, so the compiled dispatch loop and send read
them without a lookup. ``tests/test_lifecycle_twins.py`` holds both twins to the same
behaviour. Change one, change the other.
"""

__all__ = ["ConnectionLife", "SessionLife"]


cdef class ConnectionLife:
    """A connection's state: delivery started, a close begun, the close done."""

    def __init__(self):
        self.started = False
        self.closing = False
        self.closed = False

    def __repr__(self):
        return (f"ConnectionLife(started={self.started}, closing={self.closing}, "
                f"closed={self.closed})")


cdef class SessionLife:
    """A session's state: a close begun, the close done."""

    def __init__(self):
        self.closing = False
        self.closed = False

    def __repr__(self):
        return f"SessionLife(closing={self.closing}, closed={self.closed})"
