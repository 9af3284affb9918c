"""What waiting for the broker's RECEIPT costs a persistent ``stomp://`` send, and what the
``persistentSendWindow`` buys back: messages/s against an in-process ``jmspy broker``
(one client, loopback), for non-persistent sends (fire and forget), persistent sends with
window 1 (JMS: each send returns once the broker has the message) and larger windows.

Run: ``python -m benchmarks.persistent_send_window [messages]``. Figures only; nothing
here is asserted (the behaviour is tested in tests/stomp_server/test_send_refusal.py).
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from concurrent.futures import Future

from jmspy import ConnectionFactory, DeliveryMode
from jmspy.broker_ref.core import Broker
from jmspy.broker_ref.protocols.stomp import StompServer


def _serve(ready: Future[tuple[str, int]], stop: threading.Event) -> None:
    async def main() -> None:
        server = StompServer(Broker(name="bench"))
        ready.set_result(await server.start("127.0.0.1", 0))
        while not stop.is_set():
            await asyncio.sleep(0.05)
        await server.stop()

    asyncio.run(main())


def rate(url: str, count: int, mode: int, window: int) -> float:
    conn = ConnectionFactory(url, persistentSendWindow=window).create_connection()
    try:
        session = conn.create_session()
        producer = session.create_producer(session.create_queue(f"bench-{mode}-{window}"))
        producer.delivery_mode = mode
        message = session.create_text_message("x" * 100)
        start = time.perf_counter()
        for _ in range(count):
            producer.send(message)
        conn.close()  # waits for the receipts still in the window
        return count / (time.perf_counter() - start)
    finally:
        conn.close()


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 5000
    ready: Future[tuple[str, int]] = Future()
    stop = threading.Event()
    thread = threading.Thread(target=_serve, args=(ready, stop), daemon=True)
    thread.start()
    host, port = ready.result(10)
    url = f"stomp://{host}:{port}"
    try:
        rows = [("non-persistent", DeliveryMode.NON_PERSISTENT, 1)] + [
            (f"persistent, window {w}", DeliveryMode.PERSISTENT, w) for w in (1, 8, 64)]
        for label, mode, window in rows:
            print(f"{label:24} {rate(url, count, mode, window):10,.0f} msgs/s")
    finally:
        stop.set()
        thread.join(10)


if __name__ == "__main__":
    main()
