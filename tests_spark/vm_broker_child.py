"""The application side of "Spark reads an embedded broker": this process embeds the broker
(``vm://app``), serves it to other processes over a STOMP connector, prints the connector's
URL, then fills queues from an in-process ``vm://`` producer on each stdin line
``QUEUE COUNT [PREFIX]`` (answering ``filled``) until stdin closes."""

from __future__ import annotations

import sys

from jmspy import ConnectionFactory, DeliveryMode, Queue
from jmspy.transports import vm


def main() -> None:
    # a backlog of 50,000 before anyone reads, in memory: as conftest.BACKLOG_CONFIG
    host = vm.start_broker("app", destination_memory_percent=100)
    print(host.add_connector("stomp://127.0.0.1:0"), flush=True)
    with ConnectionFactory("vm://app").create_connection() as conn:
        session = conn.create_session()
        for line in sys.stdin:
            queue, count, *prefix = line.split()
            producer = session.create_producer(Queue(queue))
            for i in range(int(count)):
                producer.send(session.create_text_message(f"{''.join(prefix)}{i}"),
                              delivery_mode=DeliveryMode.NON_PERSISTENT)
            producer.close()
            print("filled", flush=True)
    vm.stop_broker("app")


if __name__ == "__main__":
    main()
