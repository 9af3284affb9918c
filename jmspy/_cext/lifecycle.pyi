"""Stub for the compiled twin built from cython_ext/lifecycle.pyx.

Same classes as :mod:`jmspy._pure.lifecycle`.
"""

__all__ = ["ConnectionLife", "SessionLife"]

class ConnectionLife:
    started: bool
    closing: bool
    closed: bool
    def __init__(self) -> None: ...

class SessionLife:
    closing: bool
    closed: bool
    def __init__(self) -> None: ...
