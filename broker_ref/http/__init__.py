"""The broker's HTTP listener (``/metrics`` and the management API): ``jmspy[http]``.

Imported only when the listener is asked for (``--metrics-port``, ``[broker.http]``), so
a broker without aiohttp installed starts as before.
"""
