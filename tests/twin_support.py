"""What the twin tests share: which twins this process can compare.

The compiled twins that build or read records (``queue_run``, ``vm_convert``,
``page_rows``, ``message_new``) reach the compiled records' C fields, so they run on the
records the compiled twins make. The compiled run of the suite compares both twins; under
``JMSPY_PUREPYTHON`` the records are the pure ones, and only the pure twin is checked
(against the behaviour it must have, not against the compiled one).
"""

from __future__ import annotations

from typing import TypeVar

import pytest

from jmspy import _speedups

T = TypeVar("T")

#: Skip a test that compares against a compiled twin running on compiled records.
needs_compiled_records = pytest.mark.skipif(
    _speedups.PURE_PYTHON, reason="the compiled twin runs on the compiled records only"
)


def record_twins(pure: T, compiled: T) -> list[T]:
    """The twins this process can run: the pure one always, the compiled one unless the
    records are pure."""
    return [pure] if _speedups.PURE_PYTHON else [pure, compiled]
