"""Stub for the compiled twin built from cython_ext/producer_core.pyx: the same class
and checks as :mod:`jmspy._pure.producer_core` (the pure twin)."""

from jmspy._pure.producer_core import (
    FIELDS,
    MessageIds,
    ProducerCore,
    check_mode,
    check_priority,
    check_seconds,
    now_ms,
)

__all__ = [
    "FIELDS",
    "MessageIds",
    "ProducerCore",
    "check_mode",
    "check_priority",
    "check_seconds",
    "now_ms",
]
