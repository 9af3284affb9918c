"""The bundled reference broker (installed as ``jmspy.broker_ref``).

``core`` holds queues, topics, subscriptions, credit-based delivery and the store
interface, and imports no network code; protocol servers sit on top of it.
"""
