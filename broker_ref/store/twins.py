"""The store's twin (see :mod:`jmspy.twins` for what a twin registry is): the reader of
packed page rows, typed as its pure twin here in the store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from jmspy import _speedups

__all__ = ["page_rows"]

if TYPE_CHECKING:
    from . import page_rows

__getattr__ = _speedups.registry(globals(), __all__)
