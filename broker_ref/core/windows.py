"""A consumer's flow window as an operator sees it: the broker's part and the client's.

The core knows two numbers of a consumer's window: the credit its client granted and has
not used, and the destination's own ``consumer_flow_limit``. The rest of the window (the
limit and threshold the client asked for, what it holds unconsumed, which header asked)
is the protocol host's: the STOMP host keeps a jmspy client's Open MQ window for it from
its SUBSCRIBE's ``jmspy-flow-limit`` / ``jmspy-flow-threshold``, or a peer's prefetch
header (``protocols/stomp/subscription.py``). A host that keeps such a window answers
:class:`WindowReporter` on its session callback; :func:`consumer_windows` joins the two
views, so the management API and console can show what no other console does: the limit,
what is buffered, the threshold, and who set the limit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .connection import ServerConnection

__all__ = ["ClientWindow", "ConsumerWindow", "WindowReporter", "consumer_windows"]


@dataclass(slots=True, frozen=True)
class ClientWindow:
    """The window a protocol host keeps for one consumer, as its client asked for it.

    ``limit``: the most the client takes unconsumed (its prefetch); ``threshold``: the
    percent of ``limit`` that unconsumed falls to before the window is refilled (100 for
    a peer's prefetch, which is kept full; None for a byte window); ``unconsumed``:
    delivered and not yet acknowledged, nacked or committed by the client (what it holds
    buffered or in hand); ``asked_by``: the header the limit came from
    (``jmspy-flow-limit``, ``activemq.prefetchSize``, ``prefetch-count``,
    ``consumer-window-size``) or ``default``."""

    limit: int
    threshold: int | None
    unconsumed: int
    asked_by: str


@runtime_checkable
class WindowReporter(Protocol):
    """A session callback whose host keeps its consumers' windows (the STOMP host)."""

    def client_window(self, consumer_id: int) -> ClientWindow | None: ...


@dataclass(slots=True, frozen=True)
class ConsumerWindow:
    """One consumer's flow window as the broker sees it.

    ``credit`` is what the client granted and has not used yet; ``delivering`` the
    messages out and unacknowledged; ``limit`` the most it may hold unacknowledged: the
    lower of the destination's ``consumer_flow_limit`` and the client's window (None when
    neither is known); ``limit_set_by`` who set it (``destination``: its
    ``consumer_flow_limit`` is the lower; ``client``: the client's window, or only its
    credit bounds it). ``client_limit``, ``threshold``, ``unconsumed`` and ``asked_by``
    are the client's window as its host keeps it (:class:`ClientWindow`), None where the
    host keeps none (vm:// and MQTT clients count their own)."""

    consumer_id: int
    queue: str
    credit: int
    delivering: int
    limit: int | None
    limit_set_by: str
    has_selector: bool
    client_limit: int | None = None
    threshold: int | None = None
    unconsumed: int | None = None
    asked_by: str | None = None


def consumer_windows(conn: ServerConnection) -> list[ConsumerWindow]:
    """The windows of ``conn``'s open consumers, the host's view joined in."""
    host = conn.callback
    reporter = host if isinstance(host, WindowReporter) else None
    out = []
    for c in conn.consumers():
        destination_limit = c.flow_limit
        client = reporter.client_window(c.consumer_id) if reporter is not None else None
        client_limit = None if client is None else client.limit
        by_destination = destination_limit is not None and (
            client_limit is None or destination_limit < client_limit)
        out.append(ConsumerWindow(
            consumer_id=c.consumer_id,
            queue=c.queue.name,
            credit=c.credit,
            delivering=len(c.delivering),
            limit=destination_limit if by_destination else client_limit,
            limit_set_by="destination" if by_destination else "client",
            has_selector=c.filter is not None,
            client_limit=client_limit,
            threshold=None if client is None else client.threshold,
            unconsumed=None if client is None else client.unconsumed,
            asked_by=None if client is None else client.asked_by,
        ))
    return out
