"""Stub for the compiled twin built from cython_ext/page_rows.pyx.

Same names and signatures as :mod:`jmspy.broker_ref.store.page_rows` (the pure twin).
"""

from jmspy.broker_ref.store.page_rows import PACKED, narrow_paged

__all__ = ["PACKED", "narrow_paged"]
