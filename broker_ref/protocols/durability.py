"""The group commit both protocol hosts make before a reply leaves a connection.

With ``group_commit`` (``jmspy broker``'s store) writes gather in one open transaction;
whichever host writes a reply first -- a STOMP RECEIPT, an MQTT PUBACK, PUBREC or SUBACK
-- commits everything the loop turn stored, for every connection of both protocols, and
only then writes. A commit that loses writes (a full disk, an I/O error) names the
connections whose stored messages it lost; each is told in its own protocol
(:class:`StoreWriter`), so no acknowledgement promises a message the disk does not hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..store.store import Store

__all__ = ["StoreWriter", "make_durable"]


@runtime_checkable
class StoreWriter(Protocol):
    """A connection that stores messages (the store's ``writer`` while it is served)."""

    def store_refused(self, why: str) -> None:
        """A commit lost messages this connection sent since its last acknowledgement
        (``why``: the store's fault): end it without acknowledging them."""


def make_durable(store: Store | None) -> str | None:
    """Commit ``store``'s pending writes (one fsync for all of them) and tell each writer
    whose stored messages the commit lost; returns why the store cannot be used any more
    (the host stops), or None."""
    if store is None:
        return None
    if store.pending:
        store.commit()
    lost = store.take_failed_writers()
    if lost:
        why = store.unusable or store.faulted or "the broker's store could not write"
        for writer in lost:
            if isinstance(writer, StoreWriter):
                writer.store_refused(why)
    return store.unusable
