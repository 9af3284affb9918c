"""What the twin tests share: which twins this process can compare, and how a client
message is compared field by field.

The compiled twins that build or read records (``queue_run``, ``vm_convert``,
``message_new``) reach the compiled records' C fields,
so they run on the records the compiled twins make. The compiled run of the suite
compares both twins; under ``JMSPY_PUREPYTHON`` the records are the pure ones, and only
the pure twin is checked (against the behaviour it must have, not against the compiled
one).
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

import pytest

from jmspy import _speedups, twins
from jmspy.message import BytesMessage, MapMessage, Message, TextMessage

T = TypeVar("T")

#: Skip a test that compares against a compiled twin running on compiled records.
needs_compiled_records = pytest.mark.skipif(
    _speedups.PURE_PYTHON, reason="the compiled twin runs on the compiled records only"
)


def record_twins(pure: T, compiled: T) -> list[T]:
    """The twins this process can run: the pure one always, the compiled one unless the
    records are pure."""
    return [pure] if _speedups.PURE_PYTHON else [pure, compiled]


def message_view(m: Message) -> tuple[Any, ...]:
    """A client message as comparable values: its class, its body as the application
    reads it (a BytesMessage's with its read position), then every record field in the
    record's order (a NaN property as the text ``"nan"``, so equal messages compare
    equal)."""
    body: Any = None
    if isinstance(m, TextMessage):
        body = m.text
    elif isinstance(m, BytesMessage):
        body = (m.body, m._pos)
    elif isinstance(m, MapMessage):
        body = m.map
    fields = tuple(
        {k: "nan" if isinstance(v, float) and math.isnan(v) else v
         for k, v in getattr(m, name).items()} if name == "_properties"
        else getattr(m, name) for name in twins.message_record.FIELDS)
    return (type(m), body, *fields)
