"""Reproduce Open MQ's documented flow-control batches with jmspy's public API only.

With the defaults imqConsumerFlowLimit=1000 and imqConsumerFlowThreshold=50 and 3000
messages waiting, the broker pre-sends 1000; consuming 499 asks for nothing; the 500th
consumption brings a batch of exactly 500, back up to 1000 unconsumed.

    python docs/examples/flow_batches.py
"""

from __future__ import annotations

from jmspy import ConnectionFactory, Session

factory = ConnectionFactory("vm://flow-batches")  # defaults: limit 1000, threshold 50 %

with factory.create_connection() as conn:
    session = conn.create_session(ack_mode=Session.AUTO_ACKNOWLEDGE)
    queue = session.create_queue("orders")
    producer = session.create_producer(queue)
    for i in range(3000):
        producer.send(session.create_text_message(f"message {i}"))

    consumer = session.create_consumer(queue)
    conn.start()

    def report(label: str) -> None:
        flow = consumer.flow_stats()
        broker = conn.destination_stats(queue)
        print(f"{label:<28} delivered={flow.delivered:<5} unconsumed={flow.unconsumed:<5} "
              f"batches={flow.batches_requested} broker deliveringCount="
              f"{broker['deliveringCount']} messageCount={broker['messageCount']}")

    report("after subscribe")
    for _ in range(499):
        consumer.receive(timeout=1.0)
    report("after 499 consumed")
    consumer.receive(timeout=1.0)
    report("after the 500th consumed")
    flow = consumer.flow_stats()
    print(f"batches: first {1000}, then {flow.delivered - 1000} "
          f"(limit {flow.limit} set by {flow.limited_by}, threshold {flow.threshold}%)")
