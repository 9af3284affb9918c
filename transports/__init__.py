"""Transports: thin adapters from the jmspy core's Transport interface to a protocol.

Installed as ``jmspy.transports``. ``vm`` reaches the bundled broker in-process; further
schemes register through the ``jmspy.transports`` entry-point group.
"""
