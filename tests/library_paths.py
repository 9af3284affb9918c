"""One marker for the tests whose subject is a client library's private hook.

The hooks run only on the tested releases and not under ``JMSPY_LIBRARY_HOOKS=0``
(transports/library_hooks.py). A test that looks at the hooked path itself (stomp.py's
replaced read step and write lock, paho's direct writes and socket reads) has nothing to
look at on the public path, so it is skipped there and says why; the compiled tox env
keeps the hooks on and runs it. Behaviour tests are not marked: they pass on both paths.
"""

from __future__ import annotations

import pytest

from jmspy.transports.mqtt import paho_private
from jmspy.transports.stomp import stomppy_private

_REASON = ("tests the hooked path of {lib}; this run takes the public path "
           "(JMSPY_LIBRARY_HOOKS=0 or an untested release); the compiled env runs it")

needs_stomp_hooks = pytest.mark.skipif(
    not stomppy_private.enabled(), reason=_REASON.format(lib="stomp.py"))
needs_paho_hooks = pytest.mark.skipif(
    not paho_private.enabled(), reason=_REASON.format(lib="paho-mqtt"))
