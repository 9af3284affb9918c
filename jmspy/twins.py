"""Every twin module, typed, loaded in one place.

``from jmspy import twins`` then ``twins.stomp_codec`` is the running twin of
``stomp_codec`` (compiled, or pure under ``JMSPY_PUREPYTHON``; :mod:`jmspy._speedups`
chooses). To the type checker each name *is* the pure twin's module: the pure twin is the
contract, and every compiled twin's ``.pyi`` stub re-states its signatures, so callers are
typed without ``Any`` and without a Protocol per module.

Loading is lazy (PEP 562 ``__getattr__``): a twin is imported when first named, not when
this module is, so a compiled twin that imports the broker core while the core imports it
meets no cycle. Bind a twin to a module global once (``_codec = twins.stomp_codec``) rather
than naming it per call.
"""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from . import _speedups

__all__ = [
    "consumer_core",
    "dispatch",
    "lifecycle",
    "message_new",
    "message_record",
    "page_rows",
    "prefetch",
    "producer_core",
    "queue_run",
    "records",
    "selector_eval",
    "socket_spin",
    "stomp_codec",
    "stomp_message",
    "stomp_received",
    "stomp_send",
    "vm_convert",
    "vm_send",
]

if TYPE_CHECKING:
    from jmspy import consumer_core
    from jmspy._pure import (
        dispatch,
        lifecycle,
        message_new,
        message_record,
        prefetch,
        producer_core,
        selector_eval,
        socket_spin,
        stomp_codec,
    )
    from jmspy.broker_ref.core import page_rows, queue_run, records
    from jmspy.broker_ref.protocols.stomp import message_frame as stomp_message
    from jmspy.broker_ref.protocols.stomp import send_path as stomp_send
    from jmspy.transports import vm_convert, vm_send
    from jmspy.transports.stomp import received as stomp_received


def __getattr__(name: str) -> ModuleType:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = _speedups.load(name)
    globals()[name] = module  # later lookups find it without this call
    return module
