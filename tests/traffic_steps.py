"""What the broker-core differential tests (test_queue_run_twins.py and
test_queue_enqueue_twins.py) share when they replay scripted traffic on a
``ServerConnection``."""

from __future__ import annotations

from typing import Any


def ack_or_cancel(conn: Any, got: list[tuple[int, int, str, int]], op: str,
                  consumer_id: int, n: int) -> None:
    """An ``"ack"`` or ``"cancel"`` step: settle the first ``n`` tags delivered to
    ``consumer_id`` (``got`` holds ``(consumer_id, tag, message_id, count)`` per delivery)
    that are still outstanding on ``conn``; with none outstanding, nothing is called."""
    tags = [t for (cid, t, _, _) in got if cid == consumer_id
            and t in conn._channel.tags][:n]
    if tags:
        (conn.ack if op == "ack" else conn.cancel)(tags)
