"""Connection factories: a broker URL (or an address list) and one set of Open MQ-style
properties, from which connections and JMS 2.0 contexts are made.

Its own module, above both: a factory makes a :class:`~jmspy.connection.Connection` and
a :class:`~jmspy.context.JMSContext`, and the context is made of a connection, so
neither of those modules may import the factory's."""

from __future__ import annotations

from typing import Any

from .connection import Connection
from .context import JMSContext
from .properties import FactoryProperties
from .transport import check_url_options, create_transport

__all__ = ["ConnectionFactory"]


class ConnectionFactory:
    """Creates connections to one broker URL, or an address list of them, with one set of
    Open MQ-style properties.

    >>> factory = ConnectionFactory("vm://embedded", imqConsumerFlowLimit=100)
    >>> factory["imqConnectionFlowLimitEnabled"] = True
    >>> cluster = ConnectionFactory("stomp://h1:61613,stomp://h2:61613")
    """

    def __init__(self, url: str | None = None, **properties: Any) -> None:
        self.properties = FactoryProperties(properties)
        #: the URL given (None: ``imqAddressList``, else ``vm://embedded``)
        self._given_url = url
        self.url = url or self.properties["imqAddressList"] or "vm://embedded"
        # an unknown URL option or a bad value fails here, not at the first connection
        check_url_options(url, self.properties.snapshot())

    def __getitem__(self, name: str) -> Any:
        return self.properties[name]

    def __setitem__(self, name: str, value: Any) -> None:
        self.properties[name] = value

    def create_connection(
        self,
        user: str | None = None,
        password: str | None = None,
        *,
        client_id: str | None = None,
    ) -> Connection:
        """Open a connection (stopped: call ``start()`` to receive)."""
        props = self.properties.snapshot()
        if client_id is not None:
            self.properties.spec("clientID").validate(client_id)
            props["clientID"] = client_id
        if user is None:
            user, password = props["imqDefaultUsername"], props["imqDefaultPassword"]
        transport = create_transport(self._given_url, props)
        return Connection(transport, props, user=user, password=password)

    def create_context(
        self,
        user: str | None = None,
        password: str | None = None,
        session_mode: int = 1,
        *,
        client_id: str | None = None,
    ) -> JMSContext:
        """A JMS 2.0 :class:`~jmspy.context.JMSContext`: a new connection and one session
        of ``session_mode`` (``JMSContext.AUTO_ACKNOWLEDGE``, ``CLIENT_ACKNOWLEDGE``,
        ``DUPS_OK_ACKNOWLEDGE``, ``SESSION_TRANSACTED``...), started by its first consumer."""
        return JMSContext(self.create_connection(user, password, client_id=client_id),
                          session_mode)

    def __repr__(self) -> str:
        return f"ConnectionFactory({self.url!r})"
