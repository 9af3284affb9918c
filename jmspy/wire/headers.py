"""Names on the wire that both the jmspy client and jmspy's broker read or write.

Only names both sides need live here; a header only one side uses stays with that side.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "BROKER_NAME",
    "DESTINATION_FLOW_LIMIT",
    "DUPLICATE_ID",
    "LEASE",
    "LEASES_DESTINATION",
    "LEASE_COUNT",
    "LEASE_FROM",
    "LEASE_RELEASE",
    "LEASE_SETTLE",
    "LEASE_TTL",
    "MAX_MESSAGES",
    "MQTT_VERSION_TOPIC",
    "NACK_MORE",
    "NACK_UNSEEN",
    "SEEN_THROUGH",
    "SEND_TIMEOUT_HEADER",
]

#: A SEND's (or COMMIT's) longest wait, in ms, while producer flow control holds it; past
#: it the broker answers with an ERROR naming the limit (the jmspy client's sendTimeout).
SEND_TIMEOUT_HEADER: Final = "jmspy-send-timeout"

#: On the RECEIPT of a SUBSCRIBE: the destination's own consumer flow limit (Open MQ's
#: ``consumerFlowLimit``, the broker's ``consumer-flow-limit`` address setting), sent when
#: the destination has one. The broker applies the lower of it and the client's
#: ``jmspy-flow-limit``; the client reports which of the two set the window
#: (``FlowStats.limited_by``).
DESTINATION_FLOW_LIMIT: Final = "jmspy-destination-flow-limit"

#: How jmspy's broker names itself: STOMP's CONNECTED ``server`` header, and the retained
#: message of MQTT's :data:`MQTT_VERSION_TOPIC`; the client's ``messaging.system`` (and
#: its STOMP broker profile) reads "jmspy" in it.
BROKER_NAME: Final = "jmspy-broker_ref/0.1"

#: The MQTT topic whose retained message names the broker and its version (Mosquitto's,
#: served by jmspy's broker too): the client asks it for ``messaging.system``.
MQTT_VERSION_TOPIC: Final = "$SYS/broker/version"

#: On a NACK: ``true`` when more NACKs of the same batch follow (a ``session.recover()``
#: hands back several messages, one NACK each). jmspy's broker holds a batch until its
#: last NACK (the one without the header) and returns it in one step, so the queue gets
#: its order back and no window refills in the middle (protocols/stomp/settling.py).
NACK_MORE: Final = "jmspy-nack-more"

#: On a NACK: ``true`` when the client never gave the message to its application (it was
#: prefetched, or arrived for a consumer that was closing). jmspy's broker returns it
#: unmarked, its delivery count not raised (Open MQ's redeliver of undelivered messages).
NACK_UNSEEN: Final = "jmspy-unseen"

#: On an UNSUBSCRIBE: the ack id of the last of the subscription's messages the client gave
#: its application (``0``: none). jmspy's broker returns the later ones -- prefetched, or
#: still on their way when the consumer closed -- unmarked, the earlier ones redelivered.
SEEN_THROUGH: Final = "jmspy-seen-through"

#: On a SUBSCRIBE: deliver at most this many messages to the subscription in all, its
#: window never refilled past them (AMQP's link credit without a refill; the destination
#: option ``consumer.maxMessages``): a reader that wants N messages gets N, and none that
#: another consumer could have had sit in its window while it finishes.
MAX_MESSAGES: Final = "jmspy-max-messages"

#: The message property that carries a message's duplicate-detection id (Artemis's name,
#: so clients written for Artemis work unchanged): a broker with duplicate detection drops
#: a second message with the same id at the same address.
DUPLICATE_ID: Final = "_AMQ_DUPL_ID"

#: Reading leases (jmspy's broker; broker_ref/core/leases.py). On an ACK: lend the
#: delivery to this token instead of consuming it (``jmspy-lease-ttl``: for how many ms;
#: the broker's default when absent). Any connection may then SEND to
#: :data:`LEASES_DESTINATION`, with a receipt, ``jmspy-lease-settle`` (consume) or
#: ``jmspy-lease-release`` (redeliver) naming comma-separated tokens; the RECEIPT's
#: ``jmspy-lease-count`` says how many messages that settled or released.
LEASE: Final = "jmspy-lease"
LEASE_TTL: Final = "jmspy-lease-ttl"
#: With ``jmspy-lease``, on a STOMP 1.2 ACK: lend every unacknowledged delivery of the
#: subscription from this ack id to the ACK's own, in one frame (a reader's whole share).
LEASE_FROM: Final = "jmspy-lease-from"
LEASES_DESTINATION: Final = "/jmspy/leases"
LEASE_SETTLE: Final = "jmspy-lease-settle"
LEASE_RELEASE: Final = "jmspy-lease-release"
LEASE_COUNT: Final = "jmspy-lease-count"
