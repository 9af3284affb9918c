"""The query options of ``vm://`` URLs: the one table :class:`.vm.VmTransport` reads them
through (jmspy/url_options.py says why a table). docs/transports.md lists the same rows;
a test holds the two to agree."""

from __future__ import annotations

from collections.abc import Mapping

from jmspy.url_options import OptionTable, flag

__all__ = ["URL_OPTIONS", "VM_URL_OPTIONS"]

VM_URL_OPTIONS = OptionTable("vm", (
    flag("create", True, "start the named in-process broker if none runs yet; `false` "
         "refuses the connection instead (the broker must have been started)"),
))

#: The tables of the schemes the vm transport serves, by scheme.
URL_OPTIONS: Mapping[str, OptionTable] = {"vm": VM_URL_OPTIONS}
