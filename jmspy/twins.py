"""The client core's twin modules, typed, loaded in one place.

``from jmspy import twins`` then ``twins.stomp_codec`` is the running twin of
``stomp_codec`` (compiled, or pure under ``JMSPY_PUREPYTHON``; :mod:`jmspy._speedups`
chooses). To the type checker each name *is* the pure twin's module: the pure twin is the
contract, and every compiled twin's ``.pyi`` stub re-states its signatures, so callers are
typed without ``Any`` and without a Protocol per module.

The twins of the API objects (producer and consumer cores, new messages) are in
:mod:`jmspy.api_twins`, above :mod:`jmspy.message`. Each layer keeps its own registry of
this kind (the broker core's
:mod:`jmspy.broker_ref.core.twins`, the transports' :mod:`jmspy.transports.twins`),
so naming a twin makes a module depend on its own layer only. Loading is lazy (PEP 562
``__getattr__``): a twin is imported when first named. Bind a twin to a module global
once (``_codec = twins.stomp_codec``) rather than naming it per call.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import _speedups

__all__ = [
    "dispatch",
    "lifecycle",
    "message_record",
    "prefetch",
    "stomp_codec",
]

if TYPE_CHECKING:
    from jmspy._pure import (
        dispatch,
        lifecycle,
        message_record,
        prefetch,
        stomp_codec,
    )

__getattr__ = _speedups.registry(globals(), __all__)
