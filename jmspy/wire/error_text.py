"""What a STOMP ERROR frame says, each thing once.

A broker puts a short reason in the ERROR's ``message`` header and often repeats it in
the body: jmspy broker starts the body with the header and goes on with what to do;
other brokers put the same sentence in both, or leave one empty. Printing header and body
side by side said the reason twice, so both ends of the wire (the client's transport and
the broker's own stats client, ``jmspy stat``) read an ERROR through this one function.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["error_text"]


def error_text(headers: Mapping[str, str], body: str) -> str:
    """The ERROR's ``message`` header and its ``body``, unless one contains the other."""
    message = headers.get("message", "").strip()
    text = body.strip()
    if not text or text in message:
        return message or "(no reason given)"
    if not message or message in text:
        return text
    return f"{message}: {text}"
