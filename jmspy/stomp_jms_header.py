"""The ``jmspy-jms`` STOMP header: what a JMS message needs that STOMP has no header for.

A jmspy SEND carries ``jmspy-jms: 1;<timestamp>;<body kind>;<property types>;<message id>``:

* ``1``: the format, so a later one can be told apart;
* JMSTimestamp in ms since the epoch;
* the body kind when ``content-type`` does not say it: empty for text (``content-type:
  text/plain``), else ``bytes``, ``map``, ``none`` or ``null-text`` (a TextMessage whose
  text is null);
* the types of the non-string properties, ``name=i|f|b`` joined by commas (JMS property
  names are Java identifiers: no ``,``, ``=`` or ``;``);
* JMSMessageID last, so it may hold any character.

Why one header and not one per field (``jmspy-message-id``, ``jmspy-timestamp``,
``jmspy-ptypes``, ``jmspy-body``, which jmspy sent before and still reads): every header
costs every hop that parses it, and a stomp.py consumer unescapes each one with two
regular expressions. Measured with stomp.py on both ends of ActiveMQ 5, window 1000,
medians of nine rounds (issue 17): 10.5k msgs/s with the three headers (and
``content-type``), 11.6k with this one, 13.9k with neither; ActiveMQ's own CPU per message
was the same for all three (61-64 us), so the price is paid by the consumers.

The jmspy broker reads the property types from here to store properties typed (server
side selectors compare numbers as numbers); the header stays a property, so a jmspy
receiver restores the same message.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

__all__ = ["HEADER", "JmsFields", "format_header", "header_of", "parse_header", "ptypes_of",
           "read_header"]

#: The header's name. Not a valid property name (``-``), so no application property can
#: collide with it; not the MQTT transport's ``jmspy-h`` either (another format), should
#: a broker carry MQTT 5 user properties over to STOMP.
HEADER: Final = "jmspy-jms"
_VERSION: Final = "1"


class JmsFields(NamedTuple):
    """The fields of one ``jmspy-jms`` header."""

    timestamp: int
    body: str  #: "" (content-type says), "bytes", "map", "none" or "null-text"
    ptypes: str  #: "name=i,other=f" (the old ``jmspy-ptypes`` header's form)
    message_id: str


def format_header(timestamp: int, body: str, ptypes: str, message_id: str) -> str:
    """The header's value for these fields."""
    return f"{_VERSION};{timestamp};{body};{ptypes};{message_id}"


def parse_header(value: str) -> JmsFields | None:
    """The fields of a ``jmspy-jms`` header, or None when it is not one this version reads
    (another format, or a header some other client sent by that name): the receiver then
    falls back to the broker's own headers, as for a message from a raw STOMP client."""
    read = read_header(value)
    return None if read is None else JmsFields(*read)


def read_header(value: str) -> tuple[int, str, str, str] | None:
    """:func:`parse_header`'s fields as a plain tuple (timestamp, body, ptypes,
    message_id): what a receiver reads once per MESSAGE, without building the named
    tuple."""
    parts = value.split(";", 4)
    if len(parts) != 5 or parts[0] != _VERSION:
        return None
    try:
        return int(parts[1]), parts[2], parts[3], parts[4]
    except ValueError:
        return None


def header_of(headers: Mapping[str, str]) -> JmsFields | None:
    """The fields of the ``jmspy-jms`` header among a frame's ``headers``, or None when
    there is none this version reads (see :func:`parse_header`)."""
    value = headers.get(HEADER)
    return None if value is None else parse_header(value)


def ptypes_of(headers: Mapping[str, str]) -> str:
    """The property types of the ``jmspy-jms`` header among ``headers`` ("" when there is
    none this version reads): all a broker needs of it, read per SEND without building
    the other fields."""
    value = headers.get(HEADER)
    read = None if value is None else read_header(value)
    return "" if read is None else read[2]
