"""``stomp://``: STOMP 1.1/1.2 through stomp.py, one module per concern. The transport is
:class:`jmspy.transports.stomp.transport.StompTransport` (see its module for how the parts
compose); importing this package alone loads nothing, so the capability matrix can read
:mod:`.mapping` without the transport."""
