"""Address lists, Open MQ's way: one connection factory naming several brokers.

A connection factory names its brokers either in its URL -- several URLs separated by
commas, ``ConnectionFactory("stomp://h1:61613,stomp://h2:61613")`` -- or in the
``imqAddressList`` property (same syntax; when set it is the list, and a URL given as
well must be the same list, see :func:`resolve`). Every
entry uses the same transport: a client moves between the nodes of one cluster, never
between protocols. TLS is a property of each address, so ``stomp://`` and
``stomp+ssl://`` (or ``mqtt://`` and ``mqtts://``) may share a list: a cluster whose
nodes move to TLS one by one stays reachable, and each address says itself whether it is
encrypted. Which broker a connection tries first and how it moves on is the
reconnect policy's business (:mod:`jmspy.reconnect`: ``imqAddressListBehavior``,
``imqAddressListIterations``, ``imqReconnectAttempts``, ``imqReconnectInterval``).

This module only parses and checks; it imports nothing of the transports.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from .errors import InvalidConfigurationException
from .tls import scheme_family

__all__ = ["BEHAVIORS", "address_list_problem", "parse", "resolve"]

#: ``imqAddressListBehavior``: PRIORITY tries the addresses in the order given (the first
#: is the preferred broker), RANDOM in a new random order on every pass.
BEHAVIORS = ("PRIORITY", "RANDOM")


def parse(text: str, *, what: str = "imqAddressList") -> list[str]:
    """The URLs of a comma-separated address list, checked: no empty entry, every entry
    ``scheme://...``, one transport for all (TLS or not per address). Raises
    InvalidConfigurationException naming the entry at fault and how to write it."""
    entries = [entry.strip() for entry in text.split(",")]
    if any(not entry for entry in entries):
        raise InvalidConfigurationException(
            f"{what}={text!r} has an empty entry: separate broker URLs with single commas, "
            "like 'stomp://h1:61613,stomp://h2:61613'")
    schemes: list[str] = []
    for entry in entries:
        if "://" not in entry:
            raise InvalidConfigurationException(
                f"{what} entry {entry!r} is not a URL: write each broker as "
                "'scheme://host:port', like 'stomp://h1:61613'")
        schemes.append(urlsplit(entry).scheme.lower())
    if len({scheme_family(scheme) for scheme in schemes}) > 1:
        raise InvalidConfigurationException(
            f"{what}={text!r} mixes schemes ({', '.join(dict.fromkeys(schemes))}): every "
            "address of a list must use the same protocol, since a connection moves between "
            "brokers of one cluster; use one transport for all (stomp:// and stomp+ssl:// "
            "may mix, as may mqtt:// and mqtts://)")
    return entries


def address_list_problem(value: str) -> str | None:
    """The property table's check of ``imqAddressList`` (None: fine)."""
    try:
        parse(value)
    except InvalidConfigurationException as exc:
        return str(exc)
    return None


def resolve(url: str | None, properties: Mapping[str, Any]) -> list[str]:
    """The broker URLs of a connection: ``imqAddressList`` when set, else the factory's
    URL (itself possibly a list). A URL given besides the property must not contradict
    it: either the same list, or absent."""
    listed = properties.get("imqAddressList")
    if listed:
        addresses = parse(listed)
        if url is not None and parse(url, what="the connection URL") != addresses:
            raise InvalidConfigurationException(
                f"the connection URL {url!r} and imqAddressList={listed!r} name different "
                "brokers: give the address list once, as the URL or as the property")
        return addresses
    if url is None:
        return ["vm://embedded"]
    if "," in url:
        return parse(url, what="the connection URL")
    return [url]
