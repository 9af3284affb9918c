# cython: language_level=3
"""The jmspy broker's MESSAGE frame for one delivery, compiled twin
(jmspy._cext.stomp_message) of jmspy/broker_ref/protocols/stomp/message_frame.py.

The pure twin builds a list of header pairs, a Frame, and hands both to the codec, which
walks the pairs again to escape and join them: three passes and a tuple per header, for
every message the broker sends. Here the frame text is written in one pass straight from
the message's fields, each header name and value scanned once in C for the four
characters STOMP 1.1/1.2 escape.

Anything off the common path goes to the pure twin, which is the reference and decides
the outcome (the same bytes, or the same error): STOMP 1.0 (no escaping), a property
named ``content-length`` or with an empty name, a 1.1 value ending in CR, text that is
not encodable as UTF-8. tests/test_stomp_message_twins.py compares the two on generated
messages, those cases included.
"""

from jmspy.broker_ref.protocols.stomp import message_frame as _pure
from jmspy.broker_ref.protocols.stomp.mapping import _RESERVED, message_body

__all__ = ["encode_message"]

cdef object _fallback = _pure.encode_message
cdef object _body_of = message_body
cdef frozenset _reserved = _RESERVED


cdef int _scan(str text, bint v12):
    """Bit 1: ``text`` holds a character to escape; bit 2: it ends in CR (1.1 cannot
    carry that: the CR would read as part of the EOL)."""
    cdef Py_UCS4 ch
    cdef int flags = 0
    for ch in text:
        if ch == u"\\" or ch == u"\n" or ch == u":":
            flags |= 1
        elif ch == u"\r" and v12:
            flags |= 1
    if not v12 and text and text[len(text) - 1] == u"\r":
        flags |= 2
    return flags


cdef inline str _escaped(str text, bint v12):
    # the pure codec's _escape, same order of replacements
    if u"\\" in text:
        text = text.replace(u"\\", u"\\\\")
    if u"\n" in text:
        text = text.replace(u"\n", u"\\n")
    if u":" in text:
        text = text.replace(u":", u"\\c")
    if v12 and u"\r" in text:
        text = text.replace(u"\r", u"\\r")
    return text


cdef inline str _prop_text(object value):
    if value is True:
        return u"true"
    if value is False:
        return u"false"
    if value is None:
        return u""
    return str(value)


cdef inline bint _add(list parts, str name, str value, bint v12) except -1:
    """Append ``name:value\\n``, escaped; False when only the pure twin can say what to
    do with this header."""
    cdef int flags = _scan(name, v12) | _scan(value, v12)
    if flags & 2:
        return False
    if flags & 1:
        name = _escaped(name, v12)
        value = _escaped(value, v12)
    parts.append(name)
    parts.append(u":")
    parts.append(value)
    parts.append(u"\n")
    return True


def encode_message(message, str destination, str subscription, str ack,
                   long delivery_count, reply_to, str version):
    cdef bint v12
    cdef list parts
    cdef str key
    cdef object value
    if version != "1.2" and version != "1.1":
        return _fallback(message, destination, subscription, ack, delivery_count, reply_to,
                         version)
    v12 = version == "1.2"
    parts = [u"MESSAGE\n"]
    if not (
        _add(parts, u"destination", destination, v12)
        and _add(parts, u"message-id", message.message_id, v12)
        and _add(parts, u"subscription", subscription, v12)
        and (not ack or _add(parts, u"ack", ack, v12))
    ):
        return _fallback(message, destination, subscription, ack, delivery_count, reply_to,
                         version)
    parts.append(u"priority:")
    parts.append(str(message.priority))
    parts.append(u"\ntimestamp:")
    parts.append(str(message.timestamp))
    parts.append(u"\nexpires:")
    parts.append(str(message.expiration))
    parts.append(u"\n")
    if delivery_count > 1:
        parts.append(u"redelivered:true\njmspy-delivery-count:")
        parts.append(str(delivery_count))
        parts.append(u"\n")
    else:
        parts.append(u"redelivered:false\n")
    if message.persistent:
        parts.append(u"persistent:true\n")
    value = message.correlation_id
    if value is not None and not _add(parts, u"correlation-id", value, v12):
        return _fallback(message, destination, subscription, ack, delivery_count, reply_to,
                         version)
    if reply_to is not None and not _add(parts, u"reply-to", reply_to, v12):
        return _fallback(message, destination, subscription, ack, delivery_count, reply_to,
                         version)
    value = message.jms_type
    if value is not None and not _add(parts, u"type", value, v12):
        return _fallback(message, destination, subscription, ack, delivery_count, reply_to,
                         version)
    for key, value in (<dict?>message.properties).items():
        if key in _reserved and key != u"content-type":
            continue
        if not key or key == u"content-length" or not _add(
                parts, key, _prop_text(value), v12):
            return _fallback(message, destination, subscription, ack, delivery_count,
                             reply_to, version)
    body, ctype = _body_of(message)
    if ctype is not None:
        parts.append(u"content-type:")
        parts.append(ctype)  # one of the codec's own constants: nothing to escape
        parts.append(u"\n")
    if body:
        parts.append(u"content-length:")
        parts.append(str(len(body)))
        parts.append(u"\n")
    parts.append(u"\n")
    try:
        head = u"".join(parts).encode("utf-8")
    except UnicodeEncodeError:
        return _fallback(message, destination, subscription, ack, delivery_count, reply_to,
                         version)
    return head + body + b"\0"
