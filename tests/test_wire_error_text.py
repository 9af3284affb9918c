"""An ERROR frame's reason is said once, by the one reader both ends of the wire use
(the client's transport, and ``jmspy stat``'s stats client)."""

from __future__ import annotations

import pytest

from jmspy.wire.error_text import error_text


@pytest.mark.parametrize(("message", "body", "said"), [
    ("authentication failed for user 'alice'", "authentication failed for user 'alice'; "
     "check the credentials", "authentication failed for user 'alice'; check the credentials"),
    ("refused", "", "refused"),
    ("refused", "refused", "refused"),
    ("", "only a body", "only a body"),
    ("short reason", "a body saying something else", "short reason: a body saying "
     "something else"),
    ("", "", "(no reason given)"),
])
def test_an_error_frames_reason_is_said_once(message: str, body: str, said: str) -> None:
    headers = {"message": message} if message else {}
    assert error_text(headers, body) == said
