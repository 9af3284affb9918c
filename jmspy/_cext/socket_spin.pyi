"""Stub for the compiled twin built from cython_ext/socket_spin.pyx.

Same functions as :mod:`jmspy._pure.socket_spin` (the pure twin).
"""

__all__ = ["poll_for"]

def poll_for(fd: int, window: float) -> int: ...
