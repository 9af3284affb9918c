"""A STOMP client's requests on reading leases (broker_ref/core/leases.py): a SEND to
``/jmspy/leases`` that settles or releases tokens, answered in its RECEIPT.

Why a SEND to a reserved destination and no new command: STOMP has none for it, and the
stats request (``/jmspy/stats``) already works this way, so any STOMP client can settle
a lease. Lending itself is an ACK with ``jmspy-lease`` (:mod:`.settling`).
"""

from __future__ import annotations

from jmspy.wire.headers import LEASE_COUNT, LEASE_RELEASE, LEASE_SETTLE, LEASES_DESTINATION

from ...core import ServerConnection
from .refusals import ProtocolError

__all__ = ["lease_request"]


def lease_request(headers: dict[str, str], core: ServerConnection) -> list[tuple[str, str]]:
    """Settle or release the tokens the SEND names; the RECEIPT's extra headers."""
    settle, release = headers.get(LEASE_SETTLE), headers.get(LEASE_RELEASE)
    if (settle is None) == (release is None):
        raise ProtocolError(
            "lease request without one operation", f"a SEND to {LEASES_DESTINATION} "
            f"names its tokens in exactly one of {LEASE_SETTLE} (consume what they hold) "
            f"or {LEASE_RELEASE} (redeliver it)")
    text = settle if settle is not None else release
    assert text is not None
    tokens = [t for t in text.split(",") if t]
    if not tokens:
        raise ProtocolError("lease request without tokens", "name one or more "
                            "comma-separated lease tokens")
    count = core.leases.settle(tokens) if settle is not None else core.leases.release(tokens)
    return [(LEASE_COUNT, str(count))]
