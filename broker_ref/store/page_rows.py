"""Store rows of the narrow page-in read back as messages, a batch at a time.

``tests/broker_core/test_page_rows.py`` requires of random rows that every message this
makes is the one the full read makes of the same row (every field, the delivery count)
and that the rows it leaves are those the full read must take. A compiled twin of this
module was retired: draining a paged queue ran no faster with it (benchmarks/README.md,
the twin ledger; a twin must show 1.10x): the SQLite read, not this loop, is the
drain's cost.

Why: draining a queue paged out to the store (seed 002) reads every message back from
SQLite. Python's ``sqlite3`` pays about 0.1 µs per column per row (each value is a few
calls into SQLite, each taking the connection's mutex), so the 19-column read plus
:func:`~.message_codec.from_row`, a ``StoredMessage`` and a tuple per row, and the
paging loops around them cost about 4 µs a message: a third of the drain. The narrow
read (:data:`~.sqlite_store.NARROW_COLUMNS`) asks SQLite for eight values: the seven a
message needs as they are, and one integer, :data:`PACKED`, that SQLite computes from the
small fields (kind, body type, delivery mode, priority, delivery count) -- or NULL when
the row has anything the narrow read does not carry (an expiry, a delivery time, a
correlation id, a reply-to, a JMS type, the JSON of layout 1 or 2, a value out of the
packed ranges). Those rows are read again in full and decoded by ``from_row`` as before;
this module turns every other row into the ``(message, delivery count, level)`` that
paging hands to the queue, in one call per batch.

The packed integer, bit by bit: 0-1 the body type (message, text, bytes, map), 2 the
destination kind (queue, topic), 3 persistent, 4-7 the priority (0-9), 8 and up the stored
delivery count (0 to 2^31 - 1).
"""

from __future__ import annotations

import json
from typing import Any

from ..core.api import BodyType, DestinationKind, ServerMessage
from .message_codec import _in
from .store import Paged

__all__ = ["PACKED", "narrow_paged"]

#: The SQL expression of the narrow read's last column (see the module docstring). Its
#: conditions are written out (no ``coalesce``/``nullif``): SQLite runs comparisons as
#: single opcodes, functions as calls, and this is evaluated for every row read.
PACKED = (
    "CASE WHEN data = x'' AND exp = 0 AND at = 0 AND corr IS NULL AND reply_kind IS NULL "
    "AND jms_type IS NULL AND priority BETWEEN 0 AND 9 AND persistent IN (0, 1) "
    "AND delivery_count BETWEEN 0 AND 2147483647 THEN delivery_count * 256 + priority * 16 "
    "+ persistent * 8 + (CASE kind WHEN 'queue' THEN 0 WHEN 'topic' THEN 4 END) "
    "+ (CASE body_type WHEN 'message' THEN 0 WHEN 'text' THEN 1 WHEN 'bytes' THEN 2 "
    "WHEN 'map' THEN 3 END) END")

_BODY_TYPES = (BodyType.MESSAGE, BodyType.TEXT, BodyType.BYTES, BodyType.MAP)
_KINDS = (DestinationKind.QUEUE, DestinationKind.TOPIC)
_MAP = BodyType.MAP


def narrow_paged(rows: list[Any], level: int,
                 recovered: bool) -> tuple[list[Paged | None], list[int]]:
    """The rows of a narrow read (``seq, id, dest, body, props, ts, size, packed``) as
    ``(message, delivery count, level)``, in order.

    ``recovered``: the rows were written before this broker started, so a delivery count
    below 1 comes back as 1 (``PageRun.delivery_count``). Returns the list, with None where
    a row needs the full read (its packed value is NULL, or its properties or map body are
    not JSON: ``from_row`` then says why), and the indexes of those rows.
    """
    out: list[Paged | None] = []
    wide: list[int] = []
    append = out.append
    for i, (_seq, message_id, dest, body, props, ts, size, packed) in enumerate(rows):
        if packed is None:
            append(None)
            wide.append(i)
            continue
        btype = _BODY_TYPES[packed & 3]
        try:
            if btype is _MAP and body is not None:
                body = {k: _in(v) for k, v in json.loads(body).items()}
            properties = json.loads(props) if props else {}
        except (ValueError, TypeError, AttributeError):
            append(None)
            wide.append(i)
            continue
        count = packed >> 8
        if recovered and count < 1:
            count = 1
        append((ServerMessage(message_id, _KINDS[packed >> 2 & 1], dest, btype, body,
                              properties, bool(packed & 8), packed >> 4 & 15, ts, 0, 0, None,
                              None, None, 0, size), count, level))
    return out, wide
