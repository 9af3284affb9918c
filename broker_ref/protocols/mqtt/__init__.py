"""The bundled broker's MQTT 3.1.1 and 5.0 host: a sans-I/O session per client
(:mod:`.session`) over the same broker core the STOMP host serves, and its asyncio
server (:mod:`.server`). The packet codec is this package's own (:mod:`.codec`)."""
